// Read-only view of a shared conversation: /#share=<token>.
// The token stays in the URL hash (never sent in a request line or Referer). All message
// text goes through textContent: nothing from a message is ever parsed as HTML.
"use strict";

(function () {
  const PAGE = 50;
  const $ = (id) => document.getElementById(id);
  const state = { token: null, before: null, loading: false };

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function shareToken() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    const token = params.get("share");
    return token && /^[A-Za-z0-9_-]{16,128}$/.test(token) ? token : null;
  }

  function setStatus(text, kind) {
    const status = $("status");
    status.textContent = text || "";
    status.className = kind || "";
  }

  function when(iso) {
    const d = new Date(iso);
    return isNaN(d) ? "" : d.toLocaleString();
  }

  // Only images whose bytes we recognise are shown, as data: URLs of a fixed type.
  function imageType(b64) {
    if (typeof b64 !== "string") return null;
    if (b64.startsWith("iVBORw0KGgo")) return "image/png";
    if (b64.startsWith("/9j/")) return "image/jpeg";
    if (b64.startsWith("R0lGOD")) return "image/gif";
    if (b64.startsWith("UklGR")) return "image/webp";
    return null;
  }

  function details(summary, body, open) {
    const d = el("details");
    if (open) d.open = true;
    d.appendChild(el("summary", null, summary));
    d.appendChild(el("pre", null, body));
    return d;
  }

  function toolCallText(call) {
    const fn = (call && call.function) || {};
    let args = fn.arguments;
    if (typeof args !== "string") args = JSON.stringify(args ?? {}, null, 2);
    return { name: fn.name || "tool", args };
  }

  function renderMessage(m) {
    const li = el("li", "msg " + m.role);
    li.dataset.seq = m.sequence_number;
    if (m.is_compression) {
      li.className = "msg compression";
      li.appendChild(details("Context compressed — summary", m.content));
      return li;
    }
    if (m.role === "system") {
      li.className = "msg event";
      li.appendChild(el("div", "role", "Event"));
      li.appendChild(el("div", "bubble", m.content));
      return li;
    }
    if (m.role === "tool") {
      li.appendChild(details("Result" + (m.name ? ": " + m.name : ""), m.content));
      return li;
    }
    if (m.is_plan) li.className += " plan";
    const label = m.is_plan ? "Plan" : m.role === "user" ? "User" : "Assistant";
    li.appendChild(el("div", "role", m.is_recall ? label + " (recall)" : label));
    if (m.thinking) li.appendChild(details("Thinking", m.thinking));
    if (m.content) li.appendChild(el("div", "bubble", m.content));
    for (const b64 of m.images || []) {
      const type = imageType(b64);
      if (!type) continue;
      const img = el("img");
      img.alt = "attached image";
      img.src = "data:" + type + ";base64," + b64;
      li.appendChild(img);
    }
    for (const call of m.tool_calls || []) {
      const t = toolCallText(call);
      li.appendChild(details("Tool call: " + t.name, t.args));
    }
    return li;
  }

  function showPage(page, prepend) {
    const list = $("messages");
    const frag = document.createDocumentFragment();
    for (const m of page.messages) frag.appendChild(renderMessage(m));
    if (prepend) list.insertBefore(frag, list.firstChild);
    else list.appendChild(frag);
    state.before = page.has_more ? page.next_before_seq : null;
    $("older").hidden = state.before === null;
  }

  function dead() {
    $("header").hidden = true;
    $("older").hidden = true;
    $("messages").replaceChildren();
    setStatus(
      "This share link does not work: the conversation was deleted, or the link is wrong.",
      "dead"
    );
  }

  async function fetchJSON(path) {
    const r = await fetch(path, { cache: "no-store", referrerPolicy: "no-referrer" });
    if (r.status === 404) return { dead: true };
    if (!r.ok) throw new Error("the server answered " + r.status);
    return { body: await r.json() };
  }

  async function load() {
    state.token = shareToken();
    state.before = null;
    $("messages").replaceChildren();
    $("older").hidden = true;
    if (!state.token) {
      $("header").hidden = true;
      setStatus("No conversation to show: open a share link (…/#share=…).", "error");
      return;
    }
    setStatus("Loading…");
    try {
      const res = await fetchJSON("/shared/" + encodeURIComponent(state.token) + "?limit=" + PAGE);
      if (res.dead) return dead();
      const s = res.body;
      $("title").textContent = s.name || "Untitled conversation";
      const parts = [s.profile_name || s.profile_id];
      if (s.created_at) parts.push("started " + when(s.created_at));
      if (s.last_active) parts.push("last active " + when(s.last_active));
      $("meta").textContent = parts.join(" · ");
      $("header").hidden = false;
      document.title = (s.name || "Shared conversation") + " — Navi";
      setStatus(s.messages.length ? "" : "This conversation has no messages to show.");
      showPage(s, false);
      window.scrollTo(0, document.body.scrollHeight);
    } catch (err) {
      setStatus("Could not load the conversation: " + err.message, "error");
    }
  }

  async function older() {
    if (state.loading || state.before === null) return;
    state.loading = true;
    const button = $("older");
    button.disabled = true;
    try {
      const res = await fetchJSON(
        "/shared/" + encodeURIComponent(state.token) + "/messages?limit=" + PAGE +
          "&before_seq=" + encodeURIComponent(state.before)
      );
      if (res.dead) return dead();
      showPage(res.body, true);
    } catch (err) {
      setStatus("Could not load older messages: " + err.message, "error");
    } finally {
      state.loading = false;
      button.disabled = false;
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("older").addEventListener("click", older);
    window.addEventListener("hashchange", load);
    load();
  });
})();
