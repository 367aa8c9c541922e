// VIP Lanes console: the only script. Refreshes the live-lanes table and ticks countdowns.
// Everything works without it (the server renders the same rows and the remaining time).
"use strict";

function tickCountdowns() {
  const now = Date.now() / 1000;
  for (const el of document.querySelectorAll(".countdown[data-until]")) {
    let s = Math.max(0, Math.floor(Number(el.dataset.until) - now));
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    s = s % 60;
    const mm = String(m).padStart(2, "0");
    const ss = String(s).padStart(2, "0");
    el.textContent = h ? `${h}h ${mm}m ${ss}s` : `${m}m ${ss}s`;
  }
}

async function refreshRows(tbody) {
  try {
    const resp = await fetch(tbody.dataset.refresh, {credentials: "same-origin", redirect: "follow"});
    if (resp.redirected || resp.url.includes("/ui/login")) {
      window.location.assign(resp.url);  // the session ended: show the sign-in page
      return;
    }
    if (resp.ok) {
      tbody.innerHTML = await resp.text();  // server-rendered, escaped by Jinja
      tickCountdowns();
    }
  } catch (err) {
    // the server is restarting: keep the last rows and try again at the next tick
  }
}

document.addEventListener("DOMContentLoaded", () => {
  tickCountdowns();
  setInterval(tickCountdowns, 1000);
  const tbody = document.getElementById("live-rows");
  if (tbody) {
    setInterval(() => refreshRows(tbody), 3000);
  }
});
