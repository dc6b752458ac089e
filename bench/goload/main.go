// Command goload is the benchmark's second load generator: the same job protocol as
// bench/load.py (one JSON job per stdin line, one JSON result per stdout line), written in Go
// so that one low-overhead client drives both capgate's gRPC Check and OPA's HTTP decision API
// (issue 8: the same generator for both sides of the comparison). Loopback targets only; every
// job is bounded by a call count and a time limit, and every answer is decoded and checked.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	capgatev1 "github.com/capgate/capgate/clients/go/capgatev1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// job is one measurement request; the fields mirror bench/load.py's.
type job struct {
	Kind        string          `json:"kind"`
	Target      string          `json:"target"`
	Method      string          `json:"method"`
	Request     string          `json:"request"`
	Metadata    [][2]string     `json:"metadata"`
	Check       string          `json:"check"`
	Expect      json.RawMessage `json:"expect"`
	Channels    int             `json:"channels"`
	Host        string          `json:"host"`
	Port        int             `json:"port"`
	Path        string          `json:"path"`
	Body        string          `json:"body"`
	Concurrency int             `json:"concurrency"`
	Count       int64           `json:"count"`
	Seconds     float64         `json:"seconds"`
	Warmup      int64           `json:"warmup"`
}

// result is what one job reports: the same keys as bench/load.py's summarize().
type result struct {
	Calls       int     `json:"calls"`
	Errors      int64   `json:"errors"`
	Bad         int64   `json:"bad"`
	ElapsedS    float64 `json:"elapsed_s"`
	CallsPerS   float64 `json:"calls_per_s"`
	P50         float64 `json:"p50_ms"`
	P90         float64 `json:"p90_ms"`
	P99         float64 `json:"p99_ms"`
	Mean        float64 `json:"mean_ms"`
	FirstError  string  `json:"first_error"`
	WarmupCalls int64   `json:"warmup_calls"`
}

// call makes one request; ok reports whether the answer was the expected one.
type call func(ctx context.Context) (ok bool, err error)

// rawCodec sends and receives pre-serialized protobuf bytes, as load.py does.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

// percentile is the nearest-rank percentile of an ascending slice (0 when empty).
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)) - 1e-9))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// drive keeps `concurrency` calls in flight until `count` calls were issued or `seconds` passed.
func drive(c call, concurrency int, count int64, seconds float64) result {
	var issued, errors, bad atomic.Int64
	var firstError atomic.Value
	started := time.Now()
	deadline := started.Add(time.Duration(seconds * float64(time.Second)))
	lat := make([][]float64, concurrency)
	lastEnd := make([]time.Time, concurrency)
	var wg sync.WaitGroup
	for i := range concurrency {
		wg.Add(1)
		go func(slot int) {
			defer wg.Done()
			for issued.Add(1) <= count && time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				t0 := time.Now()
				ok, err := c(ctx)
				cancel()
				if err != nil {
					errors.Add(1)
					firstError.CompareAndSwap(nil, truncate(err.Error(), 300))
					continue
				}
				end := time.Now()
				lastEnd[slot] = end
				lat[slot] = append(lat[slot], float64(end.Sub(t0))/1e6)
				if !ok {
					bad.Add(1)
				}
			}
		}(i)
	}
	wg.Wait()
	last := started
	var all []float64
	for i := range concurrency {
		all = append(all, lat[i]...)
		if lastEnd[i].After(last) {
			last = lastEnd[i]
		}
	}
	sort.Float64s(all)
	elapsed := last.Sub(started).Seconds()
	r := result{Calls: len(all), Errors: errors.Load(), Bad: bad.Load(), ElapsedS: round(elapsed, 3)}
	if elapsed > 0 {
		r.CallsPerS = round(float64(len(all))/elapsed, 1)
	}
	r.P50 = round(percentile(all, 0.50), 3)
	r.P90 = round(percentile(all, 0.90), 3)
	r.P99 = round(percentile(all, 0.99), 3)
	if len(all) > 0 {
		sum := 0.0
		for _, v := range all {
			sum += v
		}
		r.Mean = round(sum/float64(len(all)), 3)
	}
	if s, ok := firstError.Load().(string); ok {
		r.FirstError = s
	}
	return r
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// checker decodes an answer and says whether it is the expected one (load.py's checks).
func checker(kind string, expect json.RawMessage) (func([]byte) bool, error) {
	switch kind {
	case "procedure":
		return func(raw []byte) bool {
			var m capgatev1.ProcedureInvokeResponse
			return proto.Unmarshal(raw, &m) == nil && m.GetOutputJson() != ""
		}, nil
	case "invoke":
		var want string
		if err := json.Unmarshal(expect, &want); err != nil || want != "completed" {
			return nil, fmt.Errorf("invoke check supports expect \"completed\" only")
		}
		return func(raw []byte) bool {
			var m capgatev1.ExecutionResult
			return proto.Unmarshal(raw, &m) == nil && m.GetCompleted() != nil
		}, nil
	case "check":
		var want int32
		if err := json.Unmarshal(expect, &want); err != nil {
			return nil, fmt.Errorf("check expects a decision number: %w", err)
		}
		return func(raw []byte) bool {
			var m capgatev1.CheckResponse
			return proto.Unmarshal(raw, &m) == nil && int32(m.GetDecision()) == want
		}, nil
	case "describe":
		var want int
		if err := json.Unmarshal(expect, &want); err != nil {
			return nil, fmt.Errorf("describe expects a count: %w", err)
		}
		return func(raw []byte) bool {
			var m capgatev1.DescribeResponse
			return proto.Unmarshal(raw, &m) == nil && len(m.GetCapabilities()) >= want
		}, nil
	}
	return nil, fmt.Errorf("unknown response check %q", kind)
}

func unaryJob(j job) (result, error) {
	request, err := base64.StdEncoding.DecodeString(j.Request)
	if err != nil {
		return result{}, fmt.Errorf("request is not base64: %w", err)
	}
	check, err := checker(j.Check, j.Expect)
	if err != nil {
		return result{}, err
	}
	n := max(j.Channels, 1)
	conns := make([]*grpc.ClientConn, n)
	for i := range n {
		conn, err := grpc.NewClient(j.Target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
		if err != nil {
			return result{}, err
		}
		defer conn.Close()
		conns[i] = conn
	}
	pairs := make([]string, 0, 2*len(j.Metadata))
	for _, kv := range j.Metadata {
		pairs = append(pairs, kv[0], kv[1])
	}
	md := metadata.Pairs(pairs...)
	var next atomic.Uint64
	c := func(ctx context.Context) (bool, error) {
		conn := conns[next.Add(1)%uint64(n)]
		var reply []byte
		req := request
		if err := conn.Invoke(metadata.NewOutgoingContext(ctx, md), j.Method, &req, &reply); err != nil {
			return false, err
		}
		return check(reply), nil
	}
	return measured(c, j), nil
}

func httpJob(j job) (result, error) {
	url := fmt.Sprintf("http://%s:%d%s", j.Host, j.Port, j.Path)
	body := []byte(j.Body)
	var want string
	if err := json.Unmarshal(j.Expect, &want); err != nil {
		return result{}, fmt.Errorf("http expects a string to find in the answer: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: j.Concurrency,
		MaxConnsPerHost:     j.Concurrency,
		DisableCompression:  true,
	}}
	defer client.CloseIdleConnections()
	c := func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		payload, err := io.ReadAll(resp.Body)
		if err != nil {
			return false, err
		}
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return bytes.Contains(payload, []byte(want)), nil
	}
	return measured(c, j), nil
}

func measured(c call, j job) result {
	var warmed int64
	if j.Warmup > 0 {
		first := drive(c, j.Concurrency, j.Warmup, j.Seconds)
		warmed = int64(first.Calls) + first.Errors
	}
	r := drive(c, j.Concurrency, j.Count, j.Seconds)
	r.WarmupCalls = warmed
	return r
}

func loopback(host string) bool {
	return host == "127.0.0.1" || host == "::1" || host == "[::1]" || host == "localhost"
}

// run executes one job line; a bad job is reported as {"failed": ...}, never a crash.
func run(line []byte) any {
	var j job
	if err := json.Unmarshal(line, &j); err != nil {
		return map[string]string{"failed": "job is not JSON: " + err.Error()}
	}
	if j.Concurrency < 1 || j.Count < 1 || j.Seconds <= 0 {
		return map[string]string{"failed": "concurrency, count and seconds must be positive"}
	}
	var r result
	var err error
	switch j.Kind {
	case "unary":
		host := j.Target
		if i := strings.LastIndex(host, ":"); i > 0 && !strings.HasPrefix(host, "unix:") {
			host = host[:i]
		}
		if !strings.HasPrefix(j.Target, "unix:") && !loopback(host) {
			return map[string]string{"failed": "targets must be loopback"}
		}
		r, err = unaryJob(j)
	case "http":
		if !loopback(j.Host) {
			return map[string]string{"failed": "targets must be loopback"}
		}
		r, err = httpJob(j)
	default:
		return map[string]string{"failed": fmt.Sprintf("unknown job kind %q", j.Kind)}
	}
	if err != nil {
		return map[string]string{"failed": err.Error()}
	}
	return r
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		if err := out.Encode(run(in.Bytes())); err != nil {
			fmt.Fprintln(os.Stderr, "goload:", err)
			os.Exit(1)
		}
	}
}
