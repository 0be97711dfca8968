// The chat page's script: send a message, read the turn's Server-Sent Events as they
// come (fetch + ReadableStream, same origin, the console's cookie), then redraw the
// history from the server (its cards). Uploads and pasted images ride along.
// Text from the model goes through textContent only: nothing is parsed as HTML.
"use strict";
(function () {
  const form = document.getElementById("chat-form");
  if (!form) return;
  const $ = (id) => document.getElementById(id);
  const chat = $("chat"), input = $("chat-input"), status = $("chat-status");
  const base = "/console/chat/" + form.dataset.session;
  const headers = { "X-Navi-CSRF": form.dataset.csrf };
  const pending = { images: [], blocks: [] };
  let busy = false;

  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined) n.textContent = String(text);
    return n;
  }
  function fold(summary, body, cls) {
    const d = el("details", cls);
    d.append(el("summary", null, summary), el("pre", null, body));
    return d;
  }
  function say(text) { status.textContent = text; }
  function bottom() { window.scrollTo(0, document.body.scrollHeight); }
  function attached(text) { $("chat-attached").append(el("span", "chip", text)); }

  // A redraw from the server is dropped when a turn started after it was asked for:
  // it would replace that turn's live answer (or its error) with an older history.
  let turns = 0;
  async function refresh() {
    const asked = turns;
    const r = await fetch(location.pathname, { cache: "no-store" });
    if (!r.ok) return;
    const html = await r.text();
    if (asked !== turns) return;
    const doc = new DOMParser().parseFromString(html, "text/html");
    const fresh = doc.getElementById("chat");
    if (fresh) chat.replaceChildren(...fresh.childNodes);
    bottom();
  }

  function errorText(status, detail) {
    if (status === 503) return "No model is reachable: " + detail;
    return "The turn failed (" + status + "): " + detail;
  }

  // One turn's events into the live answer `li`.
  function handle(name, data, live) {
    if (name === "token") live.text.textContent += data.text;
    else if (name === "thinking") {
      if (!live.thinking) {
        const d = el("details", "thinking");
        d.append(el("summary", null, "Thinking"), (live.thinking = el("div", "text")));
        live.li.insertBefore(d, live.text);
      }
      live.thinking.textContent += data.text;
    } else if (name === "tool_call") {
      live.li.append(fold("Tool call: " + data.name, JSON.stringify(data.arguments, null, 2), "tool-call"));
    } else if (name === "tool_result") {
      live.li.append(fold("Result of " + data.name + (data.is_error ? " (error)" : ""), data.content, "tool-result"));
    } else if (name === "compression") {
      const counts = data.messages_before == null ? ""
        : ": " + data.messages_before + " → " + data.messages_after + " messages";
      say(data.phase === "started" ? "Compressing the context…" : "Context compressed" + counts);
    } else if (name === "usage") {
      live.usage = "tokens in " + data.prompt_eval_count + " · out " + data.eval_count;
    } else if (name === "done") {
      if (data.status === "requires_action") {
        const wait = el("div", "requires-action");
        wait.append(el("strong", null, "The agent is waiting for: "));
        for (const p of data.pending) wait.append(fold(p.name, JSON.stringify(p.arguments, null, 2)));
        live.li.append(wait);
      }
      if (live.usage) live.li.append(el("p", "usage meta", live.usage));
      return data.status;
    } else if (name === "error") {
      live.li.append(el("p", "turn-error", errorText(data.status, data.detail)));
      return "error";
    }
    return null;
  }

  async function send() {
    const content = [input.value.trim(), ...pending.blocks].filter(Boolean).join("\n\n");
    if (busy || (!content && !pending.images.length)) return;
    busy = true;
    turns += 1;
    const body = JSON.stringify({ content, images: pending.images.length ? pending.images : null });
    const you = el("li", "chat-card msg user");
    you.append(el("div", "meta", "You"), el("div", "text", content));
    const li = el("li", "chat-card msg assistant live");
    const live = { li, text: el("div", "text"), thinking: null, usage: "" };
    li.append(el("div", "meta", "Agent"), live.text);
    chat.append(you, li);
    bottom();
    say("Waiting for the agent…");
    let ended = null;
    try {
      const r = await fetch(base + "/turn", {
        method: "POST", body, headers: { ...headers, "Content-Type": "application/json" },
      });
      if (!r.ok || !r.body) {
        const html = new DOMParser().parseFromString(await r.text(), "text/html");
        const detail = html.getElementById("error-detail");
        li.append(el("p", "turn-error", errorText(r.status, detail ? detail.textContent : r.statusText)));
        ended = "error";
      } else {
        input.value = "";
        pending.images = []; pending.blocks = [];
        $("chat-attached").replaceChildren();
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let cut;
          while ((cut = buf.indexOf("\n\n")) >= 0) {
            const frame = buf.slice(0, cut); buf = buf.slice(cut + 2);
            const name = (frame.match(/^event: (.*)$/m) || [])[1];
            const data = (frame.match(/^data: (.*)$/m) || [])[1];
            if (name && data) ended = handle(name, JSON.parse(data), live) || ended;
          }
          bottom();
        }
      }
    } catch (err) {
      li.append(el("p", "turn-error", "The connection failed: " + err.message));
      ended = "error";
    }
    busy = false;
    if (ended === "error") { say("The turn failed; what was said so far is kept."); return; }
    say(ended === "requires_action" ? "The agent waits for a tool only its client runs."
      : ended === "max_rounds" ? "The agent stopped after its most rounds of tool calls." : "");
    await refresh();
  }

  form.addEventListener("submit", (e) => { e.preventDefault(); send(); });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
  });

  function toBase64(file) {
    return new Promise((ok, fail) => {
      const fr = new FileReader();
      fr.onload = () => ok(String(fr.result).split(",", 2)[1]);
      fr.onerror = () => fail(fr.error);
      fr.readAsDataURL(file);
    });
  }

  // Pasted images go with the next message, as the API's `images` (its limits apply).
  input.addEventListener("paste", async (e) => {
    for (const item of e.clipboardData.items) {
      if (item.kind !== "file" || !item.type.startsWith("image/")) continue;
      e.preventDefault();
      pending.images.push(await toBase64(item.getAsFile()));
      attached("pasted image " + pending.images.length);
    }
  });

  // Uploads: the session files API's path; the next message says where they are, and
  // an uploaded image is also shown to the model with it.
  $("chat-file").addEventListener("change", async (e) => {
    const files = [...e.target.files];
    if (!files.length) return;
    const fd = new FormData();
    for (const f of files) fd.append("files", f, f.name);
    say("Uploading…");
    const r = await fetch(base + "/files", { method: "POST", body: fd, headers });
    if (!r.ok) {
      const html = new DOMParser().parseFromString(await r.text(), "text/html");
      const detail = html.getElementById("error-detail");
      say("Upload refused (" + r.status + "): " + (detail ? detail.textContent : r.statusText));
      return;
    }
    const out = await r.json();
    pending.blocks.push(out.message_block);
    for (const f of files) {
      if (f.type.startsWith("image/")) pending.images.push(await toBase64(f));
    }
    for (const f of out.files) attached(f.name + " (" + f.size + " bytes)");
    say("Uploaded: they go with your next message.");
    e.target.value = "";
  });
})();
