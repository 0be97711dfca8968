// The console's only script: copy buttons and confirmations. Every page works without it.
"use strict";
document.addEventListener("click", async (event) => {
  const copy = event.target.closest("[data-copy]");
  if (copy) {
    event.preventDefault();
    // data-copy-text: copy the value as it is (a token); else it is a link, made absolute
    const text = "copyText" in copy.dataset
      ? copy.dataset.copy
      : new URL(copy.dataset.copy, location.href).href;
    try {
      await navigator.clipboard.writeText(text);
      copy.textContent = "Copied";
    } catch {
      window.prompt("Copy this:", text);
    }
  }
});
document.addEventListener("submit", (event) => {
  const message = event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});
