// capgate inbox: live updates over server-sent events. Served as a file because the
// Content-Security-Policy allows no inline script. New content is fetched as HTML rendered
// (and escaped) by the server and moved in with DOMParser; nothing here builds markup.
"use strict";

(function () {
  // Beside every UTC time the server wrote (<time class="utc" datetime=...>), the viewer's
  // local time, as text. Idempotent: live refreshes call it again on the new content.
  function localTimes(root) {
    for (const el of root.querySelectorAll("time.utc")) {
      const next = el.nextElementSibling;
      if (next && next.classList.contains("local")) {
        continue;
      }
      const at = new Date(el.getAttribute("datetime"));
      if (isNaN(at.getTime())) {
        continue;
      }
      const local = document.createElement("span");
      local.className = "local";
      local.textContent = at.toLocaleString(undefined, {
        year: "numeric",
        month: "short",
        day: "numeric",
        hour: "2-digit",
        minute: "2-digit",
        timeZoneName: "short",
      });
      el.after(local);
    }
  }
  localTimes(document);

  const main = document.getElementById("live");
  if (!main || !main.dataset.events) {
    return;
  }
  const approval = main.dataset.approval || "";
  let refreshing = false;

  async function refresh() {
    if (refreshing) {
      return;
    }
    refreshing = true;
    try {
      const reply = await fetch(window.location.href, {
        credentials: "same-origin",
        headers: { Accept: "text/html" },
      });
      if (!reply.ok) {
        return;
      }
      const page = new DOMParser().parseFromString(await reply.text(), "text/html");
      const next = page.getElementById("live");
      if (!next) {
        return;
      }
      const live = document.getElementById("live");
      live.replaceChildren(...Array.from(next.childNodes).map((n) => document.adoptNode(n)));
      live.dataset.version = next.dataset.version;
      localTimes(live);
      const count = page.getElementById("pending-count");
      const mine = document.getElementById("pending-count");
      if (count && mine) {
        mine.textContent = count.textContent;
      }
      const offline = document.getElementById("offline");
      if (offline && !page.getElementById("offline")) {
        offline.remove();
      }
    } finally {
      refreshing = false;
    }
  }

  function connect() {
    const since = document.getElementById("live").dataset.version || "0";
    const source = new EventSource("/events?since=" + encodeURIComponent(since));
    source.addEventListener("change", function (event) {
      let ids = [];
      try {
        ids = JSON.parse(event.data).ids || [];
      } catch (_) {
        return;
      }
      // A detail page changes only when its own approval does (keeps a note being typed).
      if (!approval || ids.indexOf(approval) >= 0) {
        refresh();
      }
    });
    source.addEventListener("error", function () {
      if (source.readyState === EventSource.CLOSED) {
        window.setTimeout(connect, 5000);
      }
    });
  }

  connect();
  if (!approval) {
    // Lists also age: re-render ages and time left twice a minute.
    window.setInterval(refresh, 30000);
  }
  for (const select of document.querySelectorAll("form.filters select")) {
    select.addEventListener("change", function () {
      select.form.submit();
    });
  }
})();
