/* benchbox history: trend charts drawn as SVG from the JSON embedded in the page.
 * No dependencies, no network. Every value from a receipt reaches the page through
 * textContent or setAttribute, never as markup. */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var W = 900, L = 78, R = 16;
  var P50 = {top: 26, bottom: 196};
  var P99 = {top: 222, bottom: 300};
  var H = 350;

  var holder = document.getElementById("history-data");
  if (!holder) { return; }
  var data = JSON.parse(holder.textContent);
  var tooltip = document.getElementById("tooltip");

  function fill(e, attrs, parent, text) {
    Object.keys(attrs || {}).forEach(function (k) {
      if (attrs[k] !== null && attrs[k] !== undefined) { e.setAttribute(k, String(attrs[k])); }
    });
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function node(tag, attrs, parent, text) { return fill(document.createElement(tag), attrs, parent, text); }
  function s(tag, attrs, parent, text) { return fill(document.createElementNS(NS, tag), attrs, parent, text); }

  function fmt(ns) {
    if (ns === null || ns === undefined) { return "–"; }
    var a = Math.abs(ns);
    if (a >= 1e6) { return (ns / 1e6).toFixed(3) + " ms"; }
    if (a >= 1e3) { return (ns / 1e3).toFixed(2) + " µs"; }
    return Math.round(ns) + " ns";
  }
  function ci(pair) { return pair ? " [" + fmt(pair[0]) + ", " + fmt(pair[1]) + "]" : " (no interval)"; }
  function pct(x) { return (x >= 0 ? "+" : "") + (100 * x).toFixed(1) + "%"; }

  function niceTicks(lo, hi, count) {
    var span = hi - lo;
    if (!(span > 0)) { return [lo]; }
    var step = Math.pow(10, Math.floor(Math.log10(span / count)));
    var err = span / count / step;
    if (err >= 7.5) { step *= 10; } else if (err >= 3.5) { step *= 5; } else if (err >= 1.5) { step *= 2; }
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) { out.push(v); }
    return out;
  }

  function usable(p) { return p.status === "valid" && p.p50 !== null; }

  function range(values) {
    var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    if (!(hi > lo)) { lo = lo * 0.95; hi = hi * 1.05 + 1; }
    var pad = (hi - lo) * 0.08;
    return [Math.max(0, lo - pad), hi + pad];
  }

  function collect(points, key) {
    var vals = [];
    points.forEach(function (p) {
      if (p[key] !== null) { vals.push(p[key]); }
      if (p[key + "_ci"]) { vals.push(p[key + "_ci"][0], p[key + "_ci"][1]); }
    });
    return vals;
  }

  function verdictClass(v) { return "v-" + String(v).toLowerCase().replace(/[^a-z]+/g, "-"); }

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
    if (p.step) {
      var st = p.step;
      lines.push("diff vs " + st.pred.slice(0, 12) + ": " + st.verdict
        + (st.ratio !== null ? " ×" + st.ratio.toFixed(3) : "")
        + (st.ci ? " [" + st.ci[0].toFixed(3) + ", " + st.ci[1].toFixed(3) + "]" : ""));
      if (st.explain) { lines.push("stages moved: " + st.explain); }
    } else {
      lines.push("first point of the series");
    }
    series.changes.forEach(function (c) {
      if (c.i === p.i) {
        lines.push("change point " + pct(c.change) + " (mean p50 " + fmt(c.before) + " → " + fmt(c.after)
          + ", p = " + c.pvalue.toPrecision(2) + ")");
      }
    });
    var labels = Object.keys(r.labels || {});
    if (labels.length) {
      lines.push("labels " + labels.map(function (k) { return k + "=" + r.labels[k]; }).join(", "));
    }
    return lines;
  }

  function showTip(lines, evt) {
    tooltip.textContent = "";
    lines.forEach(function (line, k) { node("div", {"class": k === 0 ? "tip-head" : "tip-line"}, tooltip, line); });
    tooltip.hidden = false;
    var x = evt.clientX + 14, y = evt.clientY + 14;
    var box = tooltip.getBoundingClientRect();
    if (x + box.width > window.innerWidth - 8) { x = Math.max(8, evt.clientX - box.width - 14); }
    if (y + box.height > window.innerHeight - 8) { y = Math.max(8, evt.clientY - box.height - 14); }
    tooltip.style.left = x + "px";
    tooltip.style.top = y + "px";
  }
  function hideTip() { tooltip.hidden = true; }

  function pin(article, series, group, p) {
    var panel = article.querySelector(".pinned");
    panel.textContent = "";
    describe(series, group, p).forEach(function (line, k) {
      node("div", {"class": k === 0 ? "tip-head" : "tip-line"}, panel, line);
    });
    var links = node("div", {"class": "links"}, panel);
    node("a", {href: p.receipt}, links, "receipt");
    if (p.step) {
      links.appendChild(document.createTextNode(" · "));
      node("a", {href: p.step.diff}, links, "diff with its predecessor");
      links.appendChild(document.createTextNode(" · "));
      node("a", {href: p.step.md}, links, "markdown");
    }
    panel.hidden = false;
  }

  function draw(k, host) {
    var series = data.series[k];
    var group = data.groups[series.group];
    var n = group.receipts.length;
    var pts = series.points.slice().sort(function (a, b) { return a.i - b.i; });
    var article = host.closest("article");
    var root = s("svg", {viewBox: "0 0 " + W + " " + H, "class": "trend", role: "img",
      "aria-label": "p50 and p99 of " + series.case + " · " + series.runner + " over " + n + " receipts"}, host);
    var x = function (i) { return n <= 1 ? (L + W - R) / 2 : L + (W - L - R) * i / (n - 1); };

    function panel(box, key, title) {
      var vals = collect(pts, key);
      if (!vals.length) {
        s("text", {x: L, y: (box.top + box.bottom) / 2, "class": "empty"}, root, "no " + key + " values");
        return null;
      }
      var r = range(vals);
      var y = function (v) { return box.bottom - (box.bottom - box.top) * (v - r[0]) / (r[1] - r[0]); };
      var grid = s("g", {"class": "grid"}, root);
      niceTicks(r[0], r[1], 4).forEach(function (v) {
        s("line", {x1: L, x2: W - R, y1: y(v), y2: y(v)}, grid);
        s("text", {x: L - 6, y: y(v) + 4, "class": "tick y"}, grid, fmt(v));
      });
      s("text", {x: L, y: box.top - 8, "class": "panel-title"}, root, title);
      return y;
    }

    var y50 = panel(P50, "p50", "p50 with 95% interval");
    var y99 = panel(P99, "p99", "p99 with 95% interval");

    // x axis: commit labels, thinned to fit
    var axis = s("g", {"class": "axis"}, root);
    s("line", {x1: L, x2: W - R, y1: P99.bottom + 6, y2: P99.bottom + 6}, axis);
    var every = Math.max(1, Math.ceil(n / 12));
    group.receipts.forEach(function (r, i) {
      if (i % every !== 0 && i !== n - 1) { return; }
      var t = s("text", {x: x(i), y: P99.bottom + 18, "class": "tick x",
        transform: "rotate(-30 " + x(i) + " " + (P99.bottom + 18) + ")"}, axis, r.short);
      t.setAttribute("data-i", i);
    });

    var good = pts.filter(usable);

    // change points: a dashed line through both panels at the first point after the change
    series.changes.forEach(function (c) {
      var g = s("g", {"class": "cp " + (c.change >= 0 ? "up" : "down"), "data-i": c.i,
        "data-commit": group.receipts[c.i].commit || "",
        "data-verdict": c.step ? c.step.verdict : "first"}, root);
      s("line", {x1: x(c.i), x2: x(c.i), y1: P50.top - 4, y2: P99.bottom}, g);
      var right = x(c.i) > W - 220;
      var nearTitle = x(c.i) < L + 150;
      s("text", {x: x(c.i) + (right ? -4 : 4), y: nearTitle ? P50.top + 10 : P50.top - 8, "class": "cp-label" + (right ? " end" : "")}, g,
        "change " + pct(c.change) + (c.step ? " · diff: " + c.step.verdict : ""));
    });

    function bandAndLine(ykey, yf, cls) {
      if (!yf) { return; }
      var withCi = good.filter(function (p) { return p[ykey + "_ci"]; });
      if (withCi.length > 1) {
        var upper = withCi.map(function (p) { return x(p.i) + "," + yf(p[ykey + "_ci"][1]); });
        var lower = withCi.slice().reverse().map(function (p) { return x(p.i) + "," + yf(p[ykey + "_ci"][0]); });
        s("path", {d: "M" + upper.join("L") + "L" + lower.join("L") + "Z", "class": "band " + cls}, root);
      }
      withCi.forEach(function (p) {
        s("line", {x1: x(p.i), x2: x(p.i), y1: yf(p[ykey + "_ci"][0]), y2: yf(p[ykey + "_ci"][1]),
          "class": "errbar " + cls}, root);
      });
      var withV = good.filter(function (p) { return p[ykey] !== null; });
      if (withV.length > 1) {
        s("path", {d: "M" + withV.map(function (p) { return x(p.i) + "," + yf(p[ykey]); }).join("L"),
          "class": "line " + cls}, root);
      }
    }
    bandAndLine("p50", y50, "p50");
    bandAndLine("p99", y99, "p99");

    function hook(elem, p) {
      elem.setAttribute("tabindex", "0");
      elem.addEventListener("mouseenter", function (evt) { showTip(describe(series, group, p), evt); });
      elem.addEventListener("mousemove", function (evt) { showTip(describe(series, group, p), evt); });
      elem.addEventListener("mouseleave", hideTip);
      elem.addEventListener("focus", function () {
        var b = elem.getBoundingClientRect();
        showTip(describe(series, group, p), {clientX: b.right, clientY: b.bottom});
      });
      elem.addEventListener("blur", hideTip);
      elem.addEventListener("click", function () { pin(article, series, group, p); });
      elem.addEventListener("keydown", function (evt) {
        if (evt.key === "Enter" || evt.key === " ") { pin(article, series, group, p); evt.preventDefault(); }
      });
    }

    pts.forEach(function (p) {
      var cx = x(p.i);
      var base = {"data-i": p.i, "data-id": p.id, "data-status": p.status};
      if (p.p50 === null || !y50) {
        var miss = s("path", Object.assign({d: "M" + (cx - 5) + "," + (P50.bottom - 5) + "l10,10m0,-10l-10,10",
          "class": "pt failed"}, base), root);
        hook(miss, p);
        return;
      }
      var cy = y50(p.p50);
      if (p.flags.indexOf("noisy") >= 0) { s("circle", {cx: cx, cy: cy, r: 8, "class": "flag noisy"}, root); }
      if (p.flags.indexOf("unsettled") >= 0) {
        s("rect", {x: cx - 7, y: cy - 7, width: 14, height: 14, "class": "flag unsettled",
          transform: "rotate(45 " + cx + " " + cy + ")"}, root);
      }
      if (p.step && (p.step.verdict === "slower" || p.step.verdict === "faster")) {
        var up = p.step.verdict === "slower";
        var ty = up ? cy - 13 : cy + 13;
        s("path", {d: up ? "M" + cx + "," + (ty - 5) + "l5,8h-10z" : "M" + cx + "," + (ty + 5) + "l5,-8h-10z",
          "class": "step " + p.step.verdict, "data-i": p.i}, root);
      }
      var mark;
      if (usable(p)) {
        mark = s("circle", Object.assign({cx: cx, cy: cy, r: 4, "class": "pt p50 " + verdictClass(
          p.step ? p.step.verdict : "first")}, base), root);
      } else {
        mark = s("path", Object.assign({d: "M" + (cx - 5) + "," + (cy - 5) + "l10,10m0,-10l-10,10",
          "class": "pt invalid"}, base), root);
      }
      hook(mark, p);
      if (y99 && p.p99 !== null && usable(p)) {
        hook(s("circle", Object.assign({cx: cx, cy: y99(p.p99), r: 3, "class": "pt p99"}, base), root), p);
      }
    });
    host.setAttribute("data-points", String(pts.length));
    host.setAttribute("data-changes", String(series.changes.length));
  }

  function legend(host) {
    var items = [
      ["p50 (line, 95% interval band)", function (g) { s("circle", {cx: 10, cy: 10, r: 4, "class": "pt p50"}, g); }],
      ["p99", function (g) { s("circle", {cx: 10, cy: 10, r: 3, "class": "pt p99"}, g); }],
      ["noisy run", function (g) { s("circle", {cx: 10, cy: 10, r: 7, "class": "flag noisy"}, g); }],
      ["unsettled run", function (g) {
        s("rect", {x: 4, y: 4, width: 12, height: 12, "class": "flag unsettled", transform: "rotate(45 10 10)"}, g);
      }],
      ["diff: slower than its predecessor", function (g) { s("path", {d: "M10,4l5,8h-10z", "class": "step slower"}, g); }],
      ["diff: faster", function (g) { s("path", {d: "M10,16l5,-8h-10z", "class": "step faster"}, g); }],
      ["invalid or failed", function (g) { s("path", {d: "M5,5l10,10m0,-10l-10,10", "class": "pt invalid"}, g); }],
      ["change point", function (g) { s("line", {x1: 10, x2: 10, y1: 0, y2: 20, "class": "cp-key"}, g); }]
    ];
    items.forEach(function (it) {
      var span = node("span", {"class": "key"}, host);
      var g = s("svg", {width: 20, height: 20, viewBox: "0 0 20 20"}, span);
      it[1](g);
      span.appendChild(document.createTextNode(it[0]));
    });
  }

  function filters(host) {
    var articles = Array.prototype.slice.call(document.querySelectorAll("article.series"));
    var keys = ["runner", "case", "device", "size", "dtype"];
    var state = {};
    var params = new URLSearchParams(window.location.hash.slice(1));
    var selects = {};
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
      selects[key] = sel;
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
      var shown = articles.filter(function (a) { return !a.hidden; }).length;
      host.setAttribute("data-shown", String(shown));
    }
    apply(false);
  }

  legend(document.getElementById("legend"));
  filters(document.getElementById("filters"));
  Array.prototype.forEach.call(document.querySelectorAll("div.chart"), function (host) {
    draw(Number(host.getAttribute("data-series")), host);
  });
  document.body.setAttribute("data-drawn", "true");
}());
