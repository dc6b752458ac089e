package capgate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/capgate/capgate/clients/go/capgatev1"
)

// CallOption sets optional fields of an Invoke or Resume.
type CallOption func(*callOptions)

type callOptions struct {
	idempotencyKey string
	correlationID  string
	metadata       map[string]string
}

// IdempotencyKey makes a repeat with the same key and input return the recorded result.
func IdempotencyKey(key string) CallOption { return func(o *callOptions) { o.idempotencyKey = key } }

// CorrelationID tags the execution (audit, traces) with the caller's own id.
func CorrelationID(id string) CallOption { return func(o *callOptions) { o.correlationID = id } }

// Metadata sets request metadata that policies may read (when the gateway allow-lists it).
func Metadata(md map[string]string) CallOption { return func(o *callOptions) { o.metadata = md } }

func collect(opts []CallOption) callOptions {
	var o callOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Invoke runs a capability with input (nil means {}). The deadline and cancellation come from
// ctx. Governed outcomes, failures included, are in the Result; err is a transport fault or a
// cancellation, always as *Error.
func (c *Client) Invoke(ctx context.Context, capabilityID string, input map[string]any, opts ...CallOption) (*Result, error) {
	if input == nil {
		input = map[string]any{}
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("capgate: input is not JSON-encodable: %w", err)
	}
	return c.InvokeJSON(ctx, capabilityID, raw, opts...)
}

// InvokeJSON is Invoke with the input already encoded as JSON text.
func (c *Client) InvokeJSON(ctx context.Context, capabilityID string, inputJSON []byte, opts ...CallOption) (*Result, error) {
	o := collect(opts)
	req := &capgatev1.InvokeRequest{
		CapabilityId: capabilityID, InputJson: inputJSON, IdempotencyKey: o.idempotencyKey,
		CorrelationId: o.correlationID, Metadata: o.metadata,
	}
	resp, err := c.stub.Invoke(c.Context(ctx), req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	return resultFromProto(resp)
}

// Resume executes an approved call. Only the original requester may resume, from a listener of
// the original surface; repeating it returns the stored envelope.
func (c *Client) Resume(ctx context.Context, approvalID string, opts ...CallOption) (*Result, error) {
	o := collect(opts)
	req := &capgatev1.ResumeRequest{ApprovalId: approvalID, CorrelationId: o.correlationID}
	resp, err := c.stub.Resume(c.Context(ctx), req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	return resultFromProto(resp)
}

// Capability is one capability the caller may see on this listener's surface.
type Capability struct {
	ID               string
	Description      string
	InputSchema      map[string]any // JSON Schema of the input
	SideEffect       string         // none, read, write, destructive
	Risk             string         // low, medium, high, critical
	Tags             []string
	RequiresApproval bool
}

// Catalog is a Describe answer.
type Catalog struct {
	Capabilities []Capability
	Revision     string // config and policy revision
}

// Find returns the capability with this id, or nil.
func (cat *Catalog) Find(id string) *Capability {
	for i := range cat.Capabilities {
		if cat.Capabilities[i].ID == id {
			return &cat.Capabilities[i]
		}
	}
	return nil
}

// Describe lists the capabilities visible to this caller; ids filters (none = all).
func (c *Client) Describe(ctx context.Context, ids ...string) (*Catalog, error) {
	resp, err := c.stub.Describe(c.Context(ctx), &capgatev1.DescribeRequest{CapabilityIds: ids})
	if err != nil {
		return nil, transportError(ctx, err)
	}
	cat := &Catalog{Revision: resp.GetRevision()}
	for _, d := range resp.GetCapabilities() {
		capability := Capability{
			ID: d.GetId(), Description: d.GetDescription(), SideEffect: d.GetSideEffect(),
			Risk: d.GetRisk(), Tags: d.GetTags(), RequiresApproval: d.GetRequiresApproval(),
		}
		if s := d.GetInputSchemaJson(); s != "" {
			if err := json.Unmarshal([]byte(s), &capability.InputSchema); err != nil {
				return nil, fmt.Errorf("capgate: input schema of %s is not JSON: %w", d.GetId(), err)
			}
		}
		cat.Capabilities = append(cat.Capabilities, capability)
	}
	return cat, nil
}
