/**
 * The status page's script, as the string `page.ts` inlines: polls the snapshot (`?since=` the
 * newest sample it holds, so each answer carries only what is new), keeps five minutes of
 * samples, and redraws the tiles, the workers table, the charts (inline SVG), the mesh table and
 * (with tracing on) the recent slow requests with their trace ids.
 * Data is put in the page with `textContent` only (worker URLs and router names come from
 * outside). Plain ES2017 in `String.raw`, so it has no template literals and no `${`.
 */

/** The page's script. */
export const PAGE_SCRIPT = String.raw`
"use strict";
(function () {
  var HISTORY_MS = 300000, SVG = "http://www.w3.org/2000/svg";
  var COLORS = ["#2563eb", "#16a34a", "#f59e0b", "#dc2626", "#7c3aed", "#0891b2", "#db2777",
    "#65a30d", "#475569"];
  var st = { since: 0, samples: [], prev: null, interval: 1000, key: null, timer: 0, updates: 0 };
  try { st.key = sessionStorage.getItem("smg-dashboard-key"); } catch (e) { st.key = null; }
  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function int(v) { return isNum(v) ? Math.round(v).toLocaleString("en-US") : "\u2013"; }
  function rate(v) { return isNum(v) ? (v < 10 ? v.toFixed(1) : Math.round(v).toString()) : "\u2013"; }
  function pct(v) { return isNum(v) ? Math.round(v * 100) + "%" : "\u2013"; }
  function ms(v) {
    if (!isNum(v)) return "\u2013";
    if (v < 10) return v.toFixed(1) + " ms";
    return v < 1000 ? Math.round(v) + " ms" : (v / 1000).toFixed(2) + " s";
  }
  function age(s) {
    if (s < 120) return s + " s";
    return s < 7200 ? Math.floor(s / 60) + " min" : Math.floor(s / 3600) + " h";
  }

  function schedule(ms) { clearTimeout(st.timer); st.timer = setTimeout(poll, ms); }
  function setConn(cls, text) { var c = $("conn"); c.className = cls; c.textContent = text; }
  function poll() {
    var headers = {};
    if (st.key) headers.authorization = "Bearer " + st.key;
    fetch("dashboard/snapshot?since=" + st.since, { headers: headers, cache: "no-store" })
      .then(function (r) {
        if (r.status === 401 || r.status === 403) {
          return r.json().catch(function () { return null; }).then(function (b) {
            askKey(b && b.error ? b.error.message : "key refused");
            return null;
          });
        }
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (snap) {
        if (!snap) return;
        update(snap);
        setConn("live", "live \u00b7 every " + st.interval / 1000 + " s");
        schedule(st.interval);
      })
      .catch(function (e) {
        setConn("down", "no answer (" + e.message + "), retrying");
        schedule(Math.max(2000, st.interval));
      });
  }
  function askKey(why) {
    setConn("down", why);
    $("keyform").style.display = "block";
  }
  $("keyform").addEventListener("submit", function (ev) {
    ev.preventDefault();
    st.key = $("key").value.trim() || null;
    try { sessionStorage.setItem("smg-dashboard-key", st.key || ""); } catch (e) { /* private mode */ }
    $("keyform").style.display = "none";
    poll();
  });

  function update(snap) {
    st.interval = Math.max(1000, snap.interval_ms || 1000);
    if (snap.routing.seq < st.since) { st.samples = []; st.since = 0; } // the gateway restarted
    else {
      st.samples = st.samples.concat(snap.routing.samples);
      st.since = snap.routing.seq;
    }
    var cut = snap.time_unix_ms - HISTORY_MS;
    while (st.samples.length && st.samples[0].time_unix_ms < cut) st.samples.shift();
    header(snap);
    tiles(snap);
    workers(snap);
    charts(snap);
    mesh(snap);
    slow(snap);
    st.prev = snap;
    document.body.dataset.updates = String(++st.updates); // for scripts and tests: redraws so far
  }

  function header(s) {
    var ready = s.workers.filter(function (w) { return w.status === "ready"; }).length;
    $("summary").textContent = "policy " + s.policy + " \u00b7 " + ready + "/" + s.workers.length +
      " workers ready \u00b7 up " + age(s.uptime_secs) + (s.draining ? " \u00b7 DRAINING" : "");
  }

  function last() { return st.samples.length ? st.samples[st.samples.length - 1] : null; }
  function tiles(s) {
    var l = last() || {}, t = $("tiles"), inflight = 0, backlog = 0;
    s.workers.forEach(function (w) { inflight += w.in_flight; backlog += w.prefill_backlog_tokens; });
    var ready = s.workers.filter(function (w) { return w.status === "ready" && w.breaker !== "open"; });
    var items = [
      [ready.length + " / " + s.workers.length, "workers routable"],
      [int(inflight), "requests in flight"],
      [int(backlog), "prefill backlog (tokens)"],
      [rate(l.requests_per_sec), "requests/s"],
      [rate(l.errors_per_sec), "errors/s"],
      [ms(l.ttft_p50_ms), "TTFT p50 (10 s)"],
      [ms(l.ttft_p99_ms), "TTFT p99 (10 s)"],
      [pct(l.prediction_within_0_1), "cache predictions within \u00b10.1"],
    ];
    clear(t);
    items.forEach(function (it) {
      var d = el("div", "tile");
      d.appendChild(el("b", "", it[0]));
      d.appendChild(el("span", "", it[1]));
      t.appendChild(d);
    });
  }

  function stateOf(w) {
    if (w.status === "failed" || w.status === "not_ready" || w.breaker === "open" || w.stalled) {
      return "bad";
    }
    if (w.status !== "ready" || w.breaker !== "closed" || w.overloaded) return "warn";
    return "ok";
  }
  function workers(s) {
    var body = $("workers").tBodies[0], prev = {}, dt = 0, busiest = null, max = 0;
    if (st.prev) {
      st.prev.workers.forEach(function (w) { prev[w.id] = w; });
      dt = (s.time_unix_ms - st.prev.time_unix_ms) / 1000;
    }
    s.workers.forEach(function (w) {
      if (w.in_flight > max) { max = w.in_flight; busiest = w.id; }
    });
    clear(body);
    s.workers.forEach(function (w) {
      var tr = el("tr"), state = stateOf(w), p = prev[w.id];
      tr.dataset.state = state;
      tr.dataset.url = w.url;
      if (w.id === busiest) tr.className = "busiest";
      var u = el("td", "u");
      u.appendChild(el("span", "dot"));
      u.appendChild(document.createTextNode(w.url));
      if (w.id === busiest) u.appendChild(el("span", "badge", "busiest"));
      if (w.origin === "mesh") u.appendChild(el("span", "badge", "via mesh"));
      tr.appendChild(u);
      tr.appendChild(el("td", "", w.model === null ? "\u2013" : w.model));
      tr.appendChild(el("td", "st", w.status + (w.overloaded ? " (overloaded)" : "") +
        (w.stalled ? " (stalled)" : "")));
      tr.appendChild(el("td", "", w.breaker.replace("_", "-") +
        (w.consecutive_failures ? " (" + w.consecutive_failures + " failed)" : "")));
      var f = el("td", "n"), bar = el("span", "bar");
      bar.style.width = (max > 0 ? Math.round(60 * w.in_flight / max) : 0) + "px";
      f.appendChild(bar);
      f.appendChild(document.createTextNode(int(w.in_flight)));
      tr.appendChild(f);
      tr.appendChild(el("td", "n", int(w.prefill_backlog_tokens)));
      tr.appendChild(el("td", "n", p && dt > 0 ? rate((w.requests_total - p.requests_total) / dt) : "\u2013"));
      tr.appendChild(el("td", "n", int(w.requests_total)));
      var cached = w.cached_share !== null ? pct(w.cached_share)
        : w.engine_cache_hit_rate !== null ? "\u2248" + pct(w.engine_cache_hit_rate) : "\u2013";
      tr.appendChild(el("td", "n", cached));
      var model = (s.models || []).filter(function (m) { return m.model === w.model; })[0];
      tr.appendChild(el("td", "n", w.chars_per_token !== null ? w.chars_per_token.toFixed(2)
        : model ? "~" + model.chars_per_token.toFixed(2) : "\u2013"));
      var e = el("td", "n", int(w.errors_total));
      if (w.errors_total > 0) e.style.color = "var(--bad)";
      e.title = int(w.deadline_misses_total) + " progress deadlines missed; " +
        int(w.streams_broken_total) + " streams broken mid-way, " +
        int(w.streams_continued_total) + " of them continued elsewhere";
      tr.appendChild(e);
      body.appendChild(tr);
    });
  }

  function series(name, key, color, dashed) {
    return {
      name: name, color: color, dashed: dashed,
      points: st.samples.map(function (x) {
        return [x.time_unix_ms, typeof key === "function" ? key(x) : x[key]];
      }),
    };
  }
  function charts(s) {
    var names = {};
    st.samples.forEach(function (x) {
      Object.keys(x.branches_per_sec).forEach(function (k) { names[k] = true; });
    });
    var req = [series("routed", "requests_per_sec", "#6b7280"), series("errors", "errors_per_sec", "#b91c1c")];
    Object.keys(names).sort().forEach(function (k, i) {
      req.push(series(k.replace(":", " "), function (x) {
        return x.branches_per_sec[k] === undefined ? 0 : x.branches_per_sec[k];
      }, COLORS[i % COLORS.length]));
    });
    draw("req", s, req, {});
    draw("lat", s, [series("TTFT p50", "ttft_p50_ms", COLORS[0]),
      series("TTFT p99", "ttft_p99_ms", COLORS[4]),
      series("request p50", "latency_p50_ms", COLORS[1], true),
      series("request p99", "latency_p99_ms", COLORS[3], true)], { fmt: ms });
    draw("pred", s, [series("mean error", "prediction_error_mean", COLORS[3]),
      series("within \u00b10.1 (share)", "prediction_within_0_1", COLORS[1])],
      { min: -1, max: 1, fmt: function (v) { return isNum(v) ? v.toFixed(2) : "\u2013"; } });
    var hasMesh = s.mesh !== null;
    $("lag-card").className = hasMesh ? "card" : "card hide";
    if (hasMesh) {
      draw("lag", s, [series("p50", "mesh_lag_p50_ms", COLORS[0]),
        series("p99", "mesh_lag_p99_ms", COLORS[3])], { fmt: ms });
    }
  }
  function nice(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v))), n = v / p;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * p;
  }
  function node(parent, tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    parent.appendChild(e);
    return e;
  }
  function draw(id, s, list, o) {
    var svg = $("c-" + id), H = 150, L = 48, R = 10, T = 8, B = 18;
    var W = Math.max(300, Math.round(svg.getBoundingClientRect().width) || 560); // 1 unit = 1 px
    var end = s.time_unix_ms, start = end - HISTORY_MS, fmt = o.fmt || rate;
    var lo = o.min === undefined ? 0 : o.min, hi = o.max;
    if (hi === undefined) {
      hi = 0;
      list.forEach(function (x) {
        x.points.forEach(function (p) { if (isNum(p[1]) && p[1] > hi) hi = p[1]; });
      });
      hi = nice(hi);
    }
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    clear(svg);
    function X(t) { return L + (W - L - R) * (t - start) / HISTORY_MS; }
    function Y(v) { return T + (H - T - B) * (1 - (v - lo) / (hi - lo)); }
    [lo, (lo + hi) / 2, hi].forEach(function (v) {
      node(svg, "line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), "class": "grid" });
      node(svg, "text", { x: L - 4, y: Y(v) + 3, "text-anchor": "end" }, fmt(v));
    });
    for (var m = 5; m >= 0; m--) {
      node(svg, "text", { x: X(end - m * 60000), y: H - 4, "text-anchor": m === 0 ? "end" : "middle" },
        m === 0 ? "now" : "-" + m + " min");
    }
    var legend = $("l-" + id);
    clear(legend);
    list.forEach(function (x) {
      var d = "", pen = false, latest = null;
      x.points.forEach(function (p) {
        if (!isNum(p[1]) || p[0] < start) { pen = false; return; }
        var v = Math.max(lo, Math.min(hi, p[1]));
        d += (pen ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(v).toFixed(1);
        pen = true;
        latest = p[1];
      });
      if (d) {
        var line = node(svg, "path", { d: d, stroke: x.color });
        if (x.dashed) line.setAttribute("stroke-dasharray", "5 3");
      }
      var item = el("span");
      var sw = el("i");
      sw.style.background = x.color;
      item.appendChild(sw);
      item.appendChild(document.createTextNode(x.name + " " + fmt(latest)));
      legend.appendChild(item);
    });
  }

  function mesh(s) {
    var m = s.mesh, sec = $("mesh");
    sec.className = m ? "card" : "card hide";
    if (!m) return;
    var l = last() || {}, peers = m.members.filter(function (x) { return !x.self; });
    var store = Object.keys(m.store).map(function (k) {
      return k + " " + m.store[k].live + " live / " + m.store[k].tombstones + " tombstones";
    }).join(", ");
    $("mesh-summary").textContent = "router " + m.name + " \u00b7 " + m.status +
      " \u00b7 local health " + m.local_health + " \u00b7 sync streams " + m.streams_open + "/" +
      peers.length + " \u00b7 replication lag p99 " + ms(l.mesh_lag_p99_ms) +
      (m.failure ? " \u00b7 " + m.failure : "") + (store ? " \u00b7 store: " + store : "");
    var body = $("members").tBodies[0];
    clear(body);
    m.members.forEach(function (x) {
      var tr = el("tr");
      var bad = x.status === "DOWN" || (!x.self && x.status === "ALIVE" && !x.stream_open);
      tr.dataset.state = bad ? "bad" : x.status === "ALIVE" ? "ok" : "warn";
      var n = el("td", "u");
      n.appendChild(el("span", "dot"));
      n.appendChild(document.createTextNode(x.name));
      if (x.self) n.appendChild(el("span", "badge", "this router"));
      tr.appendChild(n);
      tr.appendChild(el("td", "", x.address));
      tr.appendChild(el("td", "st", x.status));
      tr.appendChild(el("td", "n", int(x.incarnation)));
      tr.appendChild(el("td", "", x.self ? "\u2013" : x.stream_open ? "open" : "closed"));
      tr.appendChild(el("td", "n", x.queued_frames === null ? "\u2013" : int(x.queued_frames)));
      body.appendChild(tr);
    });
  }

  function slow(s) {
    var list = s.slow_requests, sec = $("slow");
    sec.className = list ? "card" : "card hide";
    if (!list) return;
    var body = $("slow-requests").tBodies[0];
    clear(body);
    list.forEach(function (r) {
      var tr = el("tr");
      tr.dataset.state = r.status >= 500 ? "bad" : r.status >= 400 ? "warn" : "ok";
      tr.appendChild(el("td", "u", r.trace_id));
      tr.appendChild(el("td", "", r.route));
      tr.appendChild(el("td", "n", String(r.status)));
      tr.appendChild(el("td", "n", int(r.ms)));
      tr.appendChild(el("td", "n", age(r.age_secs)));
      tr.appendChild(el("td", "", r.request_id));
      body.appendChild(tr);
    });
  }

  poll();
})();
`;
