/* traceadvisor report: draw the embedded plotly figures and link findings to the timeline. */
(function () {
  "use strict";
  var TA = window.__ta || { errors: [], fail: function (m) { this.errors.push(String(m)); } };

  function readJSON(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : {};
  }

  var FIGS = readJSON("ta-figures");
  var ZOOM = readJSON("ta-zoom");
  var CONFIG = {
    displaylogo: false, responsive: true, scrollZoom: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"],
    toImageButtonOptions: { format: "png", scale: 2 }
  };
  var state = {};  // figure id -> {shapes: base shapes, range: initial x range, finding, index}

  function render() {
    var jobs = [];
    document.querySelectorAll("[data-fig].plot").forEach(function (div) {
      var f = FIGS[div.getAttribute("data-fig")];
      if (!f) { TA.fail("no figure " + div.getAttribute("data-fig")); return; }
      var xr = f.layout.xaxis && f.layout.xaxis.range ? f.layout.xaxis.range.slice() : null;
      state[div.id] = { shapes: (f.layout.shapes || []).slice(), range: xr, finding: null, index: -1 };
      jobs.push(Plotly.newPlot(div, f.data, f.layout, CONFIG));
    });
    return Promise.all(jobs);
  }

  function highlight(ranges, color) {
    return ranges.slice(0, 400).map(function (r) {
      return { type: "rect", xref: "x", yref: "paper", x0: r[0], x1: r[1], y0: 0, y1: 1, layer: "above",
               fillcolor: "rgba(255,176,0,0.20)", line: { color: color || "#ff9800", width: 1 } };
    });
  }

  function window_(a, b, pad) {
    var w = Math.max(b - a, 1e-6);
    return [a - w * pad, b + w * pad];
  }

  function focusBar(figId, text) {
    var bar = document.getElementById("focus-" + figId);
    if (!bar) return;
    bar.hidden = !text;
    var lbl = bar.querySelector(".tl-focus-label");
    if (lbl) lbl.textContent = text || "";
  }

  function show(figId, x0, x1, extraShapes, label) {
    var div = document.getElementById(figId);
    var st = state[figId];
    if (!div || !st) return;
    Plotly.relayout(div, { "xaxis.range": [x0, x1], shapes: st.shapes.concat(extraShapes || []) });
    focusBar(figId, label);
    div.scrollIntoView({ behavior: "smooth", block: "center" });
  }

  function zoomFinding(fid, index) {
    var z = ZOOM[fid];
    if (!z || !z.ranges.length) return;
    var st = state[z.fig];
    st.finding = fid;
    st.index = index;
    var shapes = highlight(z.ranges, z.color);
    if (index < 0) {
      var a = Math.min.apply(null, z.ranges.map(function (r) { return r[0]; }));
      var b = Math.max.apply(null, z.ranges.map(function (r) { return r[1]; }));
      var w = window_(a, b, 0.08);
      show(z.fig, w[0], w[1], shapes, z.label + ": all " + z.ranges.length + " ranges");
    } else {
      var r = z.ranges[index];
      var w2 = window_(r[0], r[1], 1.5);
      show(z.fig, w2[0], w2[1], shapes, z.label + ": range " + (index + 1) + " of " + z.ranges.length);
    }
  }

  document.addEventListener("click", function (ev) {
    var t = ev.target.closest ? ev.target.closest("button") : null;
    if (!t) return;
    var fid = t.getAttribute("data-finding");
    if (fid) { zoomFinding(fid, (ZOOM[fid] && ZOOM[fid].ranges.length === 1) ? 0 : -1); return; }
    var figId = t.getAttribute("data-fig");
    var nav = t.getAttribute("data-nav");
    if (nav && figId) {
      var st = state[figId];
      if (nav === "reset") {
        st.finding = null;
        Plotly.relayout(figId, { "xaxis.range": st.range, shapes: st.shapes });
        focusBar(figId, "");
        return;
      }
      if (!st.finding) return;
      var n = ZOOM[st.finding].ranges.length;
      if (nav === "all") zoomFinding(st.finding, -1);
      if (nav === "next") zoomFinding(st.finding, (st.index + 1) % n);
      if (nav === "prev") zoomFinding(st.finding, (st.index - 1 + n) % n);
      return;
    }
    if (figId && t.hasAttribute("data-x0")) {
      var x0 = parseFloat(t.getAttribute("data-x0")), x1 = parseFloat(t.getAttribute("data-x1"));
      var w3 = window_(x0, x1, 1.5);
      show(figId, w3[0], w3[1], highlight([[x0, x1]]), "one item at " + x0.toFixed(3) + " ms");
    }
  });

  function done() {
    var s = document.getElementById("ta-status");
    if (!s) return;
    var plots = document.querySelectorAll(".js-plotly-plot").length;
    var svgs = document.querySelectorAll(".js-plotly-plot .main-svg").length;
    s.setAttribute("data-state", TA.errors.length ? "error" : "ready");
    s.setAttribute("data-plots", String(plots));
    s.setAttribute("data-svgs", String(svgs));
    s.setAttribute("data-errors", String(TA.errors.length));
    s.setAttribute("data-render-ms", String(Math.round((window.performance ? performance.now() : 0) - t0)));
    s.textContent = JSON.stringify(TA.errors);
  }

  var t0 = window.performance ? performance.now() : 0;
  function finish() {
    TA.update = done;  // errors after the first render update the marker too
    done();
  }
  try {
    render().then(finish, function (e) { TA.errors.push("render: " + e); finish(); });
  } catch (e) {
    TA.errors.push("render: " + e);
    finish();
  }
})();
