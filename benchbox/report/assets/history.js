/* benchbox history: one uPlot chart per series, from the JSON embedded in the page.
 * uPlot (MIT, vendored beside this file) draws lines, interval bands, axes, the cursor and
 * drag-to-zoom; this script adds the marks benchbox knows of (change points, invalid and
 * failed runs, noisy and unsettled runs), the tooltip, pinned links and the filters.
 * No network. Every value from a receipt reaches the page through textContent or
 * setAttribute, never as markup. */
(function () {
  "use strict";
  var holder = document.getElementById("history-data");
  if (!holder || typeof uPlot === "undefined") { return; }
  var data = JSON.parse(holder.textContent);
  var tooltip = document.getElementById("tooltip");
  var COLORS = {p50: "#1f6fb2", p99: "#c2621a", cp: "#6a1b9a", bad: "#555", noisy: "#d79b00",
                unsettled: "#7b3fa0", slower: "#c62828", faster: "#2e7d32"};
  var HEIGHT = 260;
  var charts = [];
  window.benchboxCharts = charts;

  function node(tag, attrs, parent, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (attrs[k] !== null && attrs[k] !== undefined) { e.setAttribute(k, String(attrs[k])); }
    });
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (parent) { parent.appendChild(e); }
    return e;
  }

  function fmt(ns) {
    if (ns === null || ns === undefined) { return "–"; }
    var a = Math.abs(ns);
    if (a >= 1e6) { return (ns / 1e6).toFixed(3) + " ms"; }
    if (a >= 1e3) { return (ns / 1e3).toFixed(2) + " µs"; }
    return Math.round(ns) + " ns";
  }
  /* axis labels: one unit per axis, as many decimals as the tick step needs */
  function ticks(u, splits) {
    var top = Math.max.apply(null, splits.map(Math.abs));
    var unit = top >= 1e6 ? [1e6, " ms"] : top >= 1e3 ? [1e3, " µs"] : [1, " ns"];
    var step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) / unit[0] : 1;
    var dec = step > 0 ? Math.min(3, Math.max(0, -Math.floor(Math.log10(step) + 1e-9))) : 0;
    return splits.map(function (v) { return (v / unit[0]).toFixed(dec) + unit[1]; });
  }
  function ci(pair) { return pair ? " [" + fmt(pair[0]) + ", " + fmt(pair[1]) + "]" : " (no interval)"; }
  function pct(x) { return (x >= 0 ? "+" : "") + (100 * x).toFixed(1) + "%"; }
  function usable(p) { return p && p.status === "valid" && p.p50 !== null; }

  function changeLine(c) {
    var st = c.step;
    return "change point " + pct(c.change) + " (mean p50 " + fmt(c.before) + " → " + fmt(c.after)
      + ", p = " + c.pvalue.toPrecision(2) + "); diff on " + st.runs[0] + " v " + st.runs[1] + " runs: "
      + st.verdict + (st.ratio !== null ? " ×" + st.ratio.toFixed(3) : "")
      + (st.ci ? " [" + st.ci[0].toFixed(3) + ", " + st.ci[1].toFixed(3) + "]" : "");
  }

  function describe(series, group, p) {
    var r = group.receipts[p.i];
    var lines = [
      series.case + " · " + series.runner,
      "commit " + (r.commit ? r.commit.slice(0, 12) : "none") + " · " + (r.created_at || "no time"),
      "status " + p.status + " · n " + p.n,
      "p50 " + fmt(p.p50) + (p.p50 !== null ? ci(p.p50_ci) : ""),
      "p99 " + fmt(p.p99) + (p.p99 !== null ? ci(p.p99_ci) : "")
    ];
    if (p.flags.length) { lines.push("flagged " + p.flags.join(", ") + ": " + p.caveats.join("; ")); }
    p.reasons.forEach(function (x) { lines.push(x); });
    series.changes.forEach(function (c) { if (c.i === p.i) { lines.push(changeLine(c)); } });
    var labels = Object.keys(r.labels || {});
    if (labels.length) {
      lines.push("labels " + labels.map(function (k) { return k + "=" + r.labels[k]; }).join(", "));
    }
    return lines;
  }

  function showTip(lines, x, y) {
    tooltip.textContent = "";
    lines.forEach(function (line, k) { node("div", {"class": k === 0 ? "tip-head" : "tip-line"}, tooltip, line); });
    tooltip.hidden = false;
    var box = tooltip.getBoundingClientRect();
    var left = x + 14, top = y + 14;
    if (left + box.width > window.innerWidth - 8) { left = Math.max(8, x - box.width - 14); }
    if (top + box.height > window.innerHeight - 8) { top = Math.max(8, y - box.height - 14); }
    tooltip.style.left = left + "px";
    tooltip.style.top = top + "px";
  }
  function hideTip() { tooltip.hidden = true; }

  function sep(parent) { parent.appendChild(document.createTextNode(" · ")); }

  function pin(article, series, group, p) {
    var panel = article.querySelector(".pinned");
    panel.textContent = "";
    describe(series, group, p).forEach(function (line, k) {
      node("div", {"class": k === 0 ? "tip-head" : "tip-line"}, panel, line);
    });
    var links = node("div", {"class": "links"}, panel);
    node("a", {href: p.receipt}, links, "receipt");
    var r = group.receipts[p.i];
    if (r.commit_url) { sep(links); node("a", {href: r.commit_url, "class": "commit"}, links, "commit"); }
    series.changes.forEach(function (c) {
      if (c.i !== p.i) { return; }
      sep(links);
      node("a", {href: c.step.diff}, links, "diff at this change point (" + c.step.verdict + ")");
      sep(links);
      node("a", {href: c.step.md}, links, "markdown");
    });
    panel.hidden = false;
  }

  /* the columns uPlot draws: x (the receipt's place in its group), p50 with its interval, p99 with its */
  function columns(series, n) {
    var cols = [[], [], [], [], [], [], []];
    var byI = {};
    series.points.forEach(function (p) { byI[p.i] = p; });
    for (var i = 0; i < n; i++) {
      var p = byI[i], ok = usable(p);
      cols[0].push(i);
      cols[1].push(ok ? p.p50 : null);
      cols[2].push(ok && p.p50_ci ? p.p50_ci[0] : null);
      cols[3].push(ok && p.p50_ci ? p.p50_ci[1] : null);
      cols[4].push(ok && p.p99 !== null ? p.p99 : null);
      cols[5].push(ok && p.p99_ci ? p.p99_ci[0] : null);
      cols[6].push(ok && p.p99_ci ? p.p99_ci[1] : null);
    }
    return {cols: cols, byI: byI};
  }

  /* benchbox's own marks, drawn on uPlot's canvas after each redraw */
  function marks(series, group, byI, n) {
    return function (u) {
      var ctx = u.ctx, px = uPlot.pxRatio, top = u.bbox.top, bottom = u.bbox.top + u.bbox.height;
      var x0 = u.bbox.left, x1 = u.bbox.left + u.bbox.width;
      ctx.save();
      for (var i = 0; i < n; i++) {
        var p = byI[i];
        if (!p) { continue; }
        var x = u.valToPos(i, "x", true);
        if (x < x0 - 1 || x > x1 + 1) { continue; }
        if (!usable(p)) {  // a cross at the foot of the plot
          var y = bottom - 8 * px, d = 5 * px;
          ctx.strokeStyle = COLORS.bad; ctx.lineWidth = 2 * px;
          ctx.beginPath(); ctx.moveTo(x - d, y - d); ctx.lineTo(x + d, y + d);
          ctx.moveTo(x + d, y - d); ctx.lineTo(x - d, y + d); ctx.stroke();
          continue;
        }
        var yv = u.valToPos(p.p50, "p50", true);
        if (p.flags.indexOf("noisy") >= 0) {
          ctx.strokeStyle = COLORS.noisy; ctx.lineWidth = 2 * px;
          ctx.beginPath(); ctx.arc(x, yv, 7 * px, 0, 2 * Math.PI); ctx.stroke();
        }
        if (p.flags.indexOf("unsettled") >= 0) {
          ctx.strokeStyle = COLORS.unsettled; ctx.lineWidth = 2 * px;
          var q = 8 * px;
          ctx.beginPath(); ctx.moveTo(x, yv - q); ctx.lineTo(x + q, yv); ctx.lineTo(x, yv + q);
          ctx.lineTo(x - q, yv); ctx.closePath(); ctx.stroke();
        }
      }
      series.changes.forEach(function (c) {
        var x = u.valToPos(c.i, "x", true);
        if (x < x0 - 1 || x > x1 + 1) { return; }
        ctx.strokeStyle = COLORS.cp; ctx.lineWidth = 1.5 * px; ctx.setLineDash([5 * px, 3 * px]);
        ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke();
        ctx.setLineDash([]);
        var label = "change " + pct(c.change) + " · " + c.step.verdict;
        ctx.font = "600 " + Math.round(11 * px) + "px system-ui, sans-serif";
        var w = ctx.measureText(label).width;
        var right = x + 4 * px + w > x1;
        ctx.fillStyle = COLORS[c.step.verdict] || COLORS.cp;
        ctx.textAlign = right ? "right" : "left";
        ctx.fillText(label, right ? x - 4 * px : x + 4 * px, top + 12 * px);
      });
      ctx.restore();
    };
  }

  function options(series, group, cols, byI, width) {
    var n = group.receipts.length;
    var receipts = group.receipts;
    return {
      width: width, height: HEIGHT,
      legend: {show: false},
      cursor: {drag: {x: true, y: false, setScale: true}, points: {size: 9}},
      // the whole series with half a commit of margin; a zoom (drag) asks for its own range
      scales: {x: {time: false, range: function (u, min, max) {
        if (n <= 1) { return [-1, 1]; }
        return min === 0 && max === n - 1 ? [-0.5, n - 0.5] : [min, max];
      }}},
      series: [
        {label: "receipt"},
        {label: "p50", scale: "p50", stroke: COLORS.p50, width: 1.6, spanGaps: true,
         points: {show: true, size: 6, fill: COLORS.p50}},
        {label: "p50 low", scale: "p50", stroke: "transparent", points: {show: false}},
        {label: "p50 high", scale: "p50", stroke: "transparent", points: {show: false}},
        {label: "p99", scale: "p99", stroke: COLORS.p99, width: 1.2, dash: [4, 3], spanGaps: true,
         points: {show: true, size: 4, fill: COLORS.p99}},
        {label: "p99 low", scale: "p99", stroke: "transparent", points: {show: false}},
        {label: "p99 high", scale: "p99", stroke: "transparent", points: {show: false}}
      ],
      bands: [{series: [3, 2], fill: "rgba(31,111,178,0.15)"}, {series: [6, 5], fill: "rgba(194,98,26,0.09)"}],
      axes: [
        {space: 64, size: 34, incrs: [1, 2, 5, 10, 20, 25, 50, 100, 200, 500, 1000],
         values: function (u, splits) {
           return splits.map(function (v) { return Number.isInteger(v) && receipts[v] ? receipts[v].short.slice(0, 8) : ""; });
         }, label: "commit (oldest left)", labelSize: 18, font: "11px ui-monospace, monospace"},
        {scale: "p50", label: "p50", labelSize: 18, size: 76, values: ticks, stroke: COLORS.p50},
        {scale: "p99", side: 1, label: "p99", labelSize: 18, size: 76, grid: {show: false}, values: ticks,
         stroke: COLORS.p99}
      ],
      hooks: {draw: [marks(series, group, byI, n)]}
    };
  }

  function draw(k, host) {
    var series = data.series[k];
    var group = data.groups[series.group];
    var article = host.closest("article");
    var n = group.receipts.length;
    var c = columns(series, n);
    var width = Math.max(320, host.clientWidth || document.body.clientWidth - 64);
    var u = new uPlot(options(series, group, c.cols, c.byI, width), c.cols, host);
    var down = null;
    function pointAt() {
      var i = u.cursor.idx;
      return i === null || i === undefined ? null : c.byI[i] || null;
    }
    u.over.addEventListener("mousemove", function (evt) {
      var p = pointAt();
      if (p) { showTip(describe(series, group, p), evt.clientX, evt.clientY); } else { hideTip(); }
    });
    u.over.addEventListener("mouseleave", hideTip);
    u.over.addEventListener("mousedown", function (evt) { down = [evt.clientX, evt.clientY]; });
    u.over.addEventListener("click", function (evt) {
      var moved = down && Math.abs(evt.clientX - down[0]) + Math.abs(evt.clientY - down[1]) > 4;
      var p = pointAt();
      if (!moved && p) { pin(article, series, group, p); }
    });
    var valid = series.points.filter(usable).length;
    host.setAttribute("data-points", String(series.points.length));
    host.setAttribute("data-valid", String(valid));
    host.setAttribute("data-marks", JSON.stringify({
      changes: series.changes.map(function (ch) { return [ch.i, group.receipts[ch.i].commit || "", ch.step.verdict]; }),
      crossed: series.points.filter(function (p) { return !usable(p); }).map(function (p) { return p.i; })
    }));
    host.setAttribute("data-drawn", "true");
    charts.push({series: k, plot: u, host: host});
  }

  function legend(host) {
    [["p50 (line, 95% interval band, left axis)", "key-p50"], ["p99 (dashed, right axis)", "key-p99"],
     ["noisy run (ring)", "key-noisy"], ["unsettled run (diamond)", "key-unsettled"],
     ["invalid or failed run (cross at the foot)", "key-bad"],
     ["change point (dashed line: change · diff verdict on the runs either side)", "key-cp"]
    ].forEach(function (it) {
      var span = node("span", {"class": "key"}, host);
      node("i", {"class": "swatch " + it[1]}, span);
      span.appendChild(document.createTextNode(it[0]));
    });
  }

  function filters(host) {
    var articles = Array.prototype.slice.call(document.querySelectorAll("article.series"));
    var keys = ["runner", "case", "device", "size", "dtype"];
    var state = {};
    var params = new URLSearchParams(window.location.hash.slice(1));
    keys.forEach(function (key) {
      var values = [];
      articles.forEach(function (a) {
        var v = a.getAttribute("data-" + key);
        if (values.indexOf(v) < 0) { values.push(v); }
      });
      values.sort();
      var label = node("label", {}, host, key + " ");
      var sel = node("select", {name: key, "data-filter": key}, label);
      node("option", {value: ""}, sel, "all (" + values.length + ")");
      values.forEach(function (v) { node("option", {value: v}, sel, v); });
      var want = params.get(key);
      if (want !== null && values.indexOf(want) >= 0) { sel.value = want; }
      state[key] = sel.value;
      sel.addEventListener("change", function () { state[key] = sel.value; apply(true); });
    });
    function apply(remember) {
      articles.forEach(function (a) {
        a.hidden = !keys.every(function (key) { return !state[key] || a.getAttribute("data-" + key) === state[key]; });
      });
      Array.prototype.forEach.call(document.querySelectorAll("section.group"), function (sec) {
        sec.hidden = !sec.querySelector("article.series:not([hidden])");
      });
      if (remember) {
        var q = new URLSearchParams();
        keys.forEach(function (key) { if (state[key]) { q.set(key, state[key]); } });
        var hash = q.toString();
        if (window.history && window.history.replaceState) {
          window.history.replaceState(null, "", window.location.href.split("#")[0] + (hash ? "#" + hash : ""));
        }
      }
      host.setAttribute("data-shown", String(articles.filter(function (a) { return !a.hidden; }).length));
      resize();
    }
    apply(false);
  }

  function resize() {
    charts.forEach(function (c) {
      var w = c.host.clientWidth;
      if (w > 0 && Math.abs(w - c.plot.width) > 2) { c.plot.setSize({width: w, height: HEIGHT}); }
    });
  }

  legend(document.getElementById("legend"));
  Array.prototype.forEach.call(document.querySelectorAll("div.chart"), function (host) {
    draw(Number(host.getAttribute("data-series")), host);
  });
  filters(document.getElementById("filters"));
  window.addEventListener("resize", resize);
  document.body.setAttribute("data-drawn", "true");
}());
