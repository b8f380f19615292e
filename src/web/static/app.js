// trajrl-validator status page: live updates. The server renders everything (escaping included);
// this script only swaps in fresh server-rendered fragments when something happens, patches the
// progress rows in place on `progress` events, and keeps elapsed times ticking. Without
// EventSource (or while the stream is down) it polls.
(() => {
  const main = document.getElementById("main");
  const top = document.getElementById("top");
  if (!main || !top) return;

  let timer = null;
  let inflight = false;
  let again = false;
  let streamOpen = false;

  const fmtDuration = (ms) => {
    if (!Number.isFinite(ms) || ms < 0) return "–";
    const s = Math.floor(ms / 1000);
    if (s < 60) return ms < 10000 ? `${(ms / 1000).toFixed(1)}s` : `${s}s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m${String(s % 60).padStart(2, "0")}s`;
    const h = Math.floor(m / 60);
    return `${h}h${String(m % 60).padStart(2, "0")}m`;
  };
  const fmtUsd = (x) =>
    !Number.isFinite(x) ? "–" : x === 0 ? "$0" : x < 1 ? `$${x.toFixed(4)}` : `$${x.toFixed(2)}`;
  const fmtScore = (x) => (x === undefined || x === null ? "–" : x.toFixed(4).replace(/\.?0+$/, "") || "0");
  const ACTIVE = new Set(["starting", "running", "verifying", "retrying"]);
  const PHASES = new Set(["queued", "starting", "running", "verifying", "done", "failed", "retrying"]);

  function stampElapsed(root) {
    const t = performance.now();
    for (const cell of root.querySelectorAll("td.elapsed")) cell.dataset.t0 = String(t);
  }

  function setLive() {
    const el = document.getElementById("live");
    if (!el) return;
    el.classList.toggle("on", streamOpen);
    el.classList.toggle("off", !streamOpen);
    el.title = streamOpen ? "live: updates stream in" : "polling: the event stream is not connected";
  }

  async function refresh() {
    if (inflight) {
      again = true;
      return;
    }
    inflight = true;
    try {
      const res = await fetch("/fragment", { cache: "no-store", headers: { accept: "application/json" } });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const j = await res.json();
      top.innerHTML = j.header;
      main.innerHTML = j.main;
      stampElapsed(main);
      setLive();
      document.body.dataset.updated = String(j.now);
    } catch (err) {
      const el = document.getElementById("live");
      if (el) {
        el.classList.remove("on");
        el.classList.add("off");
        el.textContent = `daemon not answering (${err instanceof Error ? err.message : err})`;
      }
    } finally {
      inflight = false;
      if (again) {
        again = false;
        schedule(250);
      }
    }
  }

  function schedule(delay) {
    if (timer !== null) return;
    timer = setTimeout(() => {
      timer = null;
      refresh();
    }, delay);
  }

  // The evaluation's header (done count, total spend) follows the rows it sums.
  function updateTotals() {
    const rows = [...main.querySelectorAll("tr.scenario")];
    const done = rows.filter((r) => r.dataset.phase === "done" || r.dataset.phase === "failed").length;
    const spent = rows.reduce((s, r) => s + (Number(r.dataset.spent) || 0), 0);
    const d = document.getElementById("eval-done");
    if (d) d.textContent = `${done}/${rows.length}`;
    const sp = document.getElementById("eval-spent");
    if (sp) sp.textContent = fmtUsd(spent);
  }

  // Patch one scenario row from a progress event; anything structural waits for the next fragment.
  function onProgress(e) {
    const rows = main.querySelectorAll("tr.scenario");
    let row = null;
    for (const r of rows) if (r.dataset.scenario === e.scenario) row = r;
    if (!row) return schedule(200);
    row.dataset.phase = e.phase;
    const badge = row.querySelector(".phase");
    if (badge) {
      badge.textContent = e.phase;
      badge.className = `phase ${PHASES.has(e.phase) ? `phase-${e.phase}` : "phase-unknown"}`;
    }
    const cells = row.querySelectorAll("td");
    if (cells[2]) cells[2].textContent = e.attempt > 0 ? String(e.attempt) : "–";
    const el = row.querySelector("td.elapsed");
    if (el) {
      el.dataset.elapsedMs = String(Math.round(e.elapsedMs));
      el.dataset.t0 = String(performance.now());
      el.dataset.active = ACTIVE.has(e.phase) ? "1" : "0";
      el.textContent = e.phase === "queued" ? "–" : fmtDuration(e.elapsedMs);
    }
    const frac = e.capUsd > 0 ? Math.max(0, Math.min(1, e.spentUsd / e.capUsd)) : 0;
    const rects = row.querySelectorAll("svg.bar rect");
    if (rects[1]) {
      rects[1].setAttribute("width", (frac * 100).toFixed(1));
      rects[1].setAttribute("class", frac >= 1 ? "bar-over" : frac >= 0.8 ? "bar-high" : "bar-ok");
    }
    const text = row.querySelector(".spend-text");
    if (text) text.textContent = `${fmtUsd(e.spentUsd)} / ${fmtUsd(e.capUsd)}`;
    const q = row.querySelector("td.quality");
    if (q) q.textContent = fmtScore(e.quality);
    row.dataset.spent = String(e.spentUsd);
    updateTotals();
    // Totals, chart and counters follow shortly in one fragment.
    schedule(1500);
  }

  // Elapsed times of active scenarios keep counting between events.
  setInterval(() => {
    const now = performance.now();
    for (const cell of main.querySelectorAll('td.elapsed[data-active="1"]')) {
      const base = Number(cell.dataset.elapsedMs);
      const t0 = Number(cell.dataset.t0 || now);
      cell.textContent = fmtDuration(base + (now - t0));
    }
  }, 1000);

  stampElapsed(main);

  if ("EventSource" in window) {
    const es = new EventSource("/api/events");
    es.addEventListener("open", () => {
      streamOpen = true;
      setLive();
      schedule(100); // catch up on what happened while disconnected
    });
    es.addEventListener("error", () => {
      streamOpen = false;
      setLive();
    });
    es.addEventListener("progress", (ev) => {
      try {
        onProgress(JSON.parse(ev.data));
      } catch {
        schedule(500);
      }
    });
    for (const name of ["evaluation", "epoch", "alarm", "loop", "weights", "episodeEnd"])
      es.addEventListener(name, () => schedule(300));
  }

  // Polling: the fallback while the stream is down, and a slow refresh of relative times otherwise.
  let lastPoll = performance.now();
  setInterval(() => {
    const since = performance.now() - lastPoll;
    if ((!streamOpen && since >= 5000) || since >= 30000) {
      lastPoll = performance.now();
      refresh();
    }
  }, 1000);
  setLive();
})();
