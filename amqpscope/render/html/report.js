/* amqpscope report: draws the page from the JSON in #report-data.
 * Everything captured is set as text (textContent, createTextNode, SVG text nodes), never as
 * markup, so a queue named <script> stays a name. Plots use BokehJS (inlined beside this). */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  // the frames' rows, records and detail trees, packed (pack.py): filled by loadFrames()
  var ROWS = [], RECORDS = [], DETAILS = {};
  var F_ERROR = 1, F_FINDING = 2, F_MATCH = 4, F_CONTENT = 8, F_TRANSPORT = 16;
  var ARROWS_PER_PAGE = 300, ROWS_PER_PAGE = 200;
  // lanes: colours that differ in lightness too, and a dash pattern each, so that lanes stay
  // apart printed in grey
  var LANES = [
    ["#1f4e9c", ""], ["#b35900", "6 3"], ["#2e7d32", "2 3"], ["#6a1b9a", "8 3 2 3"],
    ["#00838f", "4 4"], ["#5d4037", "1 2"], ["#455a64", "10 2"], ["#ad1457", "3 1"]
  ];
  var SVGNS = "http://www.w3.org/2000/svg";
  var CONNECTION_FRAMES_10 = ["open", "close", "empty", "heartbeat"];

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (k === "text") node.textContent = attrs[k];
        else if (k === "cls") node.className = attrs[k];
        else node.setAttribute(k, attrs[k]);
      });
    }
    (children || []).forEach(function (c) {
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }
  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVGNS, tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.appendChild(document.createTextNode(text));
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function str(v) { return v === null || v === undefined ? "" : String(v); }
  // a log without timestamps (Proton's trace): rows carry their log line where a time would be
  var UNTIMED = DATA.facts.timed === false;
  function fmtTime(t) { return UNTIMED ? "L" + t : Number(t).toFixed(6); }
  // an interval in words: "0.25 s", "7.8 ms", "31 µs"
  function fmtWidth(w) {
    if (w >= 1) return +w.toPrecision(3) + " s";
    if (w >= 1e-3) return +(w * 1e3).toPrecision(3) + " ms";
    return +(w * 1e6).toPrecision(3) + " \u00b5s";
  }

  // ---- the packed frames (pack.py): base64 of deflated JSON, columns to rows and records ----
  var TAG = "\u0000";
  function untag(v) {
    if (Array.isArray(v)) return v.map(untag);
    if (v === null || typeof v !== "object") return v;
    var keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === TAG) {
      var t = v[TAG];
      if (t[0] === "i") return BigInt(t[1]);
      return t[1] === "nan" ? NaN : t[1] === "inf" ? Infinity : -Infinity;
    }
    var out = Object.create(null);  // a key "__proto__" stays a key
    keys.forEach(function (k) { out[k.charAt(0) === TAG ? k.slice(1) : k] = untag(v[k]); });
    return out;
  }
  function unleaf(node) {
    var out = [], at = 0;
    if (node.i) node.i.forEach(function (d) { at += d; out.push(at); });
    else if (node.u) node.u.forEach(function (d) { at += d; out.push(at / 1e6); });
    else out = node.v.map(untag);
    return out;
  }
  function unshred(node) {
    if (!node.s) return unleaf(node);
    var kids = Object.create(null);
    Object.keys(node.d).forEach(function (k) { kids[k] = { values: unshred(node.d[k]), at: 0 }; });
    var others = node.o ? unleaf(node.o) : [], o = 0;
    return node.x.map(function (shape) {
      if (shape < 0) return others[o++];
      var value = Object.create(null);
      node.s[shape].forEach(function (k) { var kid = kids[k]; value[k] = kid.values[kid.at++]; });
      return value;
    });
  }
  function loadFrames() {
    var text = document.getElementById("report-frames").textContent.trim();
    var bytes = Uint8Array.from(atob(text), function (ch) { return ch.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).text().then(function (json) {
      var frames = JSON.parse(json);
      var columns = frames.rows.map(unleaf);
      var count = columns.length ? columns[0].length : 0;
      ROWS = [];
      for (var i = 0; i < count; i++) ROWS.push(columns.map(function (c) { return c[i]; }));
      RECORDS = unshred(frames.records);
      DETAILS = frames.details;
    });
  }

  // ---- frames by number, connections ----
  var rowByNumber = {}, conns = [], connById = {};
  function indexFrames() {
    ROWS.forEach(function (r, i) { rowByNumber[r[0]] = i; });
    conns = DATA.connections.map(function (c) { return c.id; });
    var known = new Set(conns);
    ROWS.forEach(function (r) { if (!known.has(r[2])) { known.add(r[2]); conns.push(r[2]); } });
    DATA.connections.forEach(function (c) { connById[c.id] = c; });
  }

  // ---- overview ----
  function overview() {
    var f = DATA.facts;
    document.title = "amqpscope report: " + str(f.file);
    var facts = [
      ["File", f.file], f["log-format"] ? ["Log format", f["log-format"]] : ["Packets", f.packets], ["Frames", f.frames],
      UNTIMED ? ["Duration", "not known: the log has no timestamps (frames show their log line, L1 ...)"] : ["Duration (s)", f.duration],
      ["Connections", DATA.connections.length],
      ["Display filter", f.filter || "none"],
      ["Secrets", f["show-secrets"] ? "shown (--show-secrets)" : "redacted"],
      ["Bodies", f["redact-bodies"] ? "redacted (--redact-bodies)" : "kept"]
    ];
    if (f["rows-left-out"]) facts.push(["Frames left out of the diagram and list", f["rows-left-out"] + " (use --from/--to)"]);
    if (f["details-left-out"]) facts.push(["Frames without a detail tree", f["details-left-out"]]);
    if (f.records && f.records !== "whole") facts.push(["Records the display filter sees", f.records + " (to stay under 5 MB; read -Y sees all)"]);
    [["diagnoses-left-out", "Diagnoses not listed"], ["connections-left-out", "Connections not listed"],
     ["units-left-out", "Links and channels not listed"], ["out-of-scope", "Frames outside --conn, --from, --to ..."]].forEach(function (p) {
      if (f[p[0]]) facts.push([p[1], f[p[0]]]);
    });
    var dl = document.getElementById("facts");
    facts.forEach(function (p) {
      dl.appendChild(el("dt", { text: p[0] }));
      dl.appendChild(el("dd", { text: str(p[1]) }));
    });
    var list = document.getElementById("diagnoses");
    if (!DATA.diagnoses.length) list.appendChild(el("li", { text: "Nothing found." }));
    DATA.diagnoses.forEach(function (d) {
      var item = el("li", { cls: "diagnosis sev-" + str(d.severity) }, [
        el("span", { cls: "badge", text: str(d.severity).toUpperCase() }), " ",
        el("code", { text: str(d.code) }), " ",
        el("span", { text: str(d.title) })
      ]);
      var where = [];
      if (d.conn !== null && d.conn !== undefined) where.push("connection c" + d.conn);
      ["channel", "session", "link", "queue", "address"].forEach(function (k) {
        if (d[k] !== null && d[k] !== undefined) where.push(k + " " + d[k]);
      });
      if (typeof d.start === "number" && !UNTIMED) {
        var start = d.start > 1e8 ? d.start - DATA.facts.start : d.start;  // absolute or relative
        where.push("at " + start.toFixed(3) + " s" + (typeof d.duration === "number" ? " for " + d.duration.toFixed(3) + " s" : ""));
      }
      if (where.length) item.appendChild(el("span", { cls: "muted", text: " (" + where.join(", ") + ")" }));
      if (d.explanation) item.appendChild(el("p", { text: d.explanation }));
      (d.evidence || []).forEach(function (n) {
        var b = el("button", { type: "button", cls: "evidence", text: "frame " + n });
        b.addEventListener("click", function () { goToFrame(n); });
        item.appendChild(document.createTextNode(" "));
        item.appendChild(b);
      });
      list.appendChild(item);
    });
    var read = DATA["input-findings"] || [];  // what read says on stderr: damage, skipped lines
    if (read.length) document.getElementById("input-findings-box").hidden = false;
    read.forEach(function (f) {
      document.getElementById("input-findings").appendChild(el("li", { cls: "diagnosis sev-" + str(f.severity) }, [
        el("span", { cls: "badge", text: str(f.severity).toUpperCase() }), " ",
        el("code", { text: str(f.code) }), " ",
        el("span", { text: str(f.message) })
      ]));
    });
    var body = document.querySelector("#connections tbody");
    DATA.connections.forEach(function (c) {
      body.appendChild(el("tr", {}, [
        el("td", { text: "c" + c.id }), el("td", { text: str(c.version) }),
        el("td", { text: str(c.client) }), el("td", { text: str(c["client-peer"]) }),
        el("td", { text: str(c.server) }), el("td", { text: str(c["server-peer"]) }),
        el("td", { text: str(c.state) + (c.transport ? ", " + c.transport : "") })
      ]));
    });
    (DATA.undecoded || []).forEach(function (u) {
      body.appendChild(el("tr", {}, [
        el("td", { text: "c" + u.id }), el("td", { text: "undecoded" }),
        el("td", { text: str(u.client) }), el("td", { text: "" }),
        el("td", { text: str(u.server) }), el("td", { text: "" }),
        el("td", { text: (u.layers || []).map(function (l) { return l.name; }).join(", ") })
      ]));
    });
  }

  // ---- frame detail ----
  // a node is [name, value, type, children, offset, length] (model.compact_tree)
  function treeNode(n) {
    var node = { name: n[0], value: n[1], type: n[2], children: n[3], offset: n[4], length: n[5] };
    var label = [el("span", { cls: "name", text: str(node.name) })];
    if (node.value !== undefined && node.value !== null) label.push(": ", el("span", { cls: "value", text: str(node.value) }));
    // a record's or layer's node (the -V tree's own) has no type worth a word
    if (node.type && node.type !== "record" && node.type !== "layer") label.push(el("span", { cls: "type", text: " (" + node.type + ")" }));
    if (node.offset !== undefined && node.offset !== null) label.push(el("span", { cls: "type", text: " @" + node.offset + "+" + str(node.length) }));
    if (node.children && node.children.length) {
      var details = el("details", { open: "" }, [el("summary", {}, label)]);
      var ul = el("ul");
      node.children.forEach(function (c) { ul.appendChild(el("li", {}, [treeNode(c)])); });
      details.appendChild(ul);
      return details;
    }
    return el("span", {}, label);
  }
  function showDetail(n) {
    var box = document.getElementById("detail-body");
    clear(box);
    var i = rowByNumber[n];
    var heading = document.getElementById("detail-title");
    heading.textContent = "Frame " + n + (i !== undefined ? ": " + ROWS[i][5] + " " + ROWS[i][6] : "");
    var tree = DETAILS[String(n)];
    if (!tree) {
      box.appendChild(el("p", { text: "This frame's detail was not kept (the report keeps the first frames and the evidence); amqpscope read -Y 'frame == " + n + "' -V shows it." }));
    } else {
      var ul = el("ul", { cls: "tree" });
      tree.forEach(function (node) { ul.appendChild(el("li", {}, [treeNode(node)])); });
      box.appendChild(ul);
    }
    document.getElementById("detail").setAttribute("data-frame", String(n));
  }

  // ---- sequence diagram ----
  var diagram = { conn: null, page: 0, from: null, to: null };
  function diagramArrows() {
    var out = [];
    ROWS.forEach(function (r) {
      if (r[2] !== diagram.conn) return;
      if (diagram.from !== null && r[1] < diagram.from) return;
      if (diagram.to !== null && r[1] > diagram.to) return;
      var last = out.length ? out[out.length - 1] : null;
      if ((r[7] & F_CONTENT) && last && last.row[3] === r[3] && last.row[4] === r[4]) {
        last.folded.push(r);  // message bodies fold into the frame that began the message
        return;
      }
      out.push({ row: r, folded: [] });
    });
    return out;
  }
  /* a frame's lane: 0-9-1 its channel; 1.0 its link (by the name its attach gave it, the
   * same both ways), else its session; connection frames one lane of their own */
  function laneKey(r, c) {
    var connectionFrame = c.version === "1.0" ? CONNECTION_FRAMES_10.indexOf(r[5]) >= 0 : r[4] === 0;
    if (r[4] === null || r[4] === undefined || connectionFrame) return "connection";
    if (c.version !== "1.0") return "channel " + r[4];
    return "session " + r[4] + (r[9] !== null && r[9] !== undefined ? ", link " + r[9] : "");
  }
  /* the connection's lanes in order of their first frame: the diagram keeps its columns from
   * page to page */
  function connectionLanes(conn, c) {
    var lanes = {}, order = [];
    ROWS.forEach(function (r) {
      if (r[2] !== conn) return;
      var key = laneKey(r, c);
      if (!(key in lanes)) { lanes[key] = order.length; order.push(key); }
    });
    return { index: lanes, keys: order };
  }
  function drawDiagram() {
    var box = document.getElementById("diagram-svg");
    clear(box);
    var arrows = diagramArrows();
    var pages = Math.max(1, Math.ceil(arrows.length / ARROWS_PER_PAGE));
    diagram.page = Math.min(diagram.page, pages - 1);
    document.getElementById("diagram-page").textContent =
      "page " + (diagram.page + 1) + " of " + pages + " (" + arrows.length + " arrows)";
    var shown = arrows.slice(diagram.page * ARROWS_PER_PAGE, (diagram.page + 1) * ARROWS_PER_PAGE);
    var c = connById[diagram.conn] || {};
    var lanes = connectionLanes(diagram.conn, c);
    var width = 1000, left = 260, right = 900, step = 30, top = 70;
    var height = top + shown.length * step + 20;
    // each lane a track of its own between the lifelines, tagged L1, L2 ... (the legend names them)
    var span = right - left - 80, gap = lanes.keys.length > 1 ? span / (lanes.keys.length - 1) : 0;
    function trackX(k) { return lanes.keys.length > 1 ? left + 40 + k * gap : (left + right) / 2; }
    var root = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "group", "aria-label": "Sequence diagram of connection c" + diagram.conn, id: "sequence" });
    root.appendChild(svg("text", { x: left, y: 18, "text-anchor": "middle", "class": "lifeline-title" }, "client " + str(c.client)));
    root.appendChild(svg("text", { x: left, y: 34, "text-anchor": "middle", "class": "peer" }, str(c["client-peer"])));
    root.appendChild(svg("text", { x: right, y: 18, "text-anchor": "middle", "class": "lifeline-title" }, "server " + str(c.server)));
    root.appendChild(svg("text", { x: right, y: 34, "text-anchor": "middle", "class": "peer" }, str(c["server-peer"])));
    root.appendChild(svg("line", { x1: left, y1: top - 30, x2: left, y2: height, "class": "lifeline" }));
    root.appendChild(svg("line", { x1: right, y1: top - 30, x2: right, y2: height, "class": "lifeline" }));
    lanes.keys.forEach(function (key, k) {
      var lane = LANES[k % LANES.length], x = trackX(k);
      var g = svg("g", { "class": "track", "data-lane": key });
      g.appendChild(svg("line", { x1: x, y1: top - 12, x2: x, y2: height, stroke: lane[0], "stroke-dasharray": lane[1] || "1 0", "class": "track-line" }));
      g.appendChild(svg("text", { x: x, y: top - 16, "text-anchor": "middle", "class": "track-tag" }, "L" + (k + 1)));
      root.appendChild(g);
    });
    shown.forEach(function (a, i) {
      var r = a.row, y = top + i * step + 20;
      var key = laneKey(r, c), k = lanes.index[key], lane = LANES[k % LANES.length];
      var c2s = r[3] !== "s2c";
      var x1 = c2s ? left : right, x2 = c2s ? right : left;
      var error = r[7] & F_ERROR, finding = r[7] & F_FINDING;
      var g = svg("g", { "class": "arrow" + (error ? " error" : "") + (finding ? " finding" : ""), tabindex: "0", role: "button", "data-frame": String(r[0]), "data-lane": key });
      var channel = key === "connection" ? null : r[4];
      var label = (channel !== null && channel !== undefined ? (c.version === "1.0" ? "s" : "ch") + channel + " " : "") + r[5] + (r[6] ? " " + r[6] : "");
      if (a.folded.length) label += "  [+" + a.folded.length + " folded]";
      if (finding) label = "\u26a0 " + label + "  (" + r[8].join(", ") + ")";
      else if (error) label = "\u2716 " + label;
      g.setAttribute("aria-label", "frame " + r[0] + (UNTIMED ? " on log line " + r[1] : " at " + fmtTime(r[1]) + " s") + ", " + (c2s ? "client to server" : "server to client") + ", " + key + ": " + label);
      g.appendChild(svg("rect", { x: 0, y: y - 24, width: width, height: step, "class": "hit" }));
      g.appendChild(svg("text", { x: 8, y: y + 4, "class": "when" }, "#" + r[0] + "  " + fmtTime(r[1])));
      g.appendChild(svg("line", { x1: x1, y1: y, x2: x2, y2: y, stroke: error ? "#c00000" : lane[0], "stroke-dasharray": lane[1], "stroke-width": error ? 3 : 1.5, "class": "shaft" }));
      var head = c2s ? (x2 - 9) + "," + (y - 5) + " " + x2 + "," + y + " " + (x2 - 9) + "," + (y + 5)
                     : (x2 + 9) + "," + (y - 5) + " " + x2 + "," + y + " " + (x2 + 9) + "," + (y + 5);
      g.appendChild(svg("polygon", { points: head, fill: error ? "#c00000" : lane[0] }));
      // where the arrow crosses its lane's track: a mark, its shape the lane's too (greyscale)
      g.appendChild(svg(k % 2 ? "rect" : "circle", k % 2
        ? { x: trackX(k) - 4, y: y - 4, width: 8, height: 8, fill: lane[0], "class": "lane-mark" }
        : { cx: trackX(k), cy: y, r: 4.5, fill: lane[0], "class": "lane-mark" }));
      var text = label.length > 96 ? label.slice(0, 95) + "\u2026" : label;
      g.appendChild(svg("text", { x: (left + right) / 2, y: y - 7, "text-anchor": "middle", "class": "label" }, text));
      g.addEventListener("click", function () { select(g); });
      g.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); select(g); }
        else if (ev.key === "ArrowDown" && g.nextSibling) { ev.preventDefault(); g.nextSibling.focus(); }
        else if (ev.key === "ArrowUp" && g.previousSibling && g.previousSibling.getAttribute("data-frame")) { ev.preventDefault(); g.previousSibling.focus(); }
      });
      root.appendChild(g);
    });
    box.appendChild(root);
    var legend = document.getElementById("diagram-legend");
    clear(legend);
    lanes.keys.forEach(function (key, k) {
      var lane = LANES[k % LANES.length];
      var sw = svg("svg", { width: 40, height: 10, "aria-hidden": "true" });
      sw.appendChild(svg("line", { x1: 0, y1: 5, x2: 40, y2: 5, stroke: lane[0], "stroke-width": 2, "stroke-dasharray": lane[1] }));
      legend.appendChild(el("span", { cls: "lane", "data-lane": key }, [sw, " L" + (k + 1) + " " + key]));
    });
  }
  function select(g) {
    var old = document.querySelector("#sequence .selected");
    if (old) old.classList.remove("selected");
    g.classList.add("selected");
    showDetail(Number(g.getAttribute("data-frame")));
  }
  function goToFrame(n) {
    var i = rowByNumber[n];
    if (i === undefined) { showDetail(n); return; }
    var r = ROWS[i];
    diagram.conn = r[2]; diagram.from = null; diagram.to = null;
    document.getElementById("diagram-conn").value = String(r[2]);
    document.getElementById("diagram-from").value = "";
    document.getElementById("diagram-to").value = "";
    var arrows = diagramArrows();
    for (var k = 0; k < arrows.length; k++) {
      var a = arrows[k];
      if (a.row[0] === n || a.folded.some(function (f) { return f[0] === n; })) {
        diagram.page = Math.floor(k / ARROWS_PER_PAGE);
        drawDiagram();
        var g = document.querySelector('#sequence g[data-frame="' + a.row[0] + '"]');
        if (g) { select(g); g.focus(); }
        showDetail(n);
        return;
      }
    }
    showDetail(n);
  }
  function diagramControls() {
    if (UNTIMED) {  // the range is of log lines; there are no plots to take one from
      document.querySelectorAll(".when-unit").forEach(function (u) { u.textContent = "line"; });
      document.getElementById("diagram-from-plots").hidden = true;
      document.getElementById("frames-when").textContent = "line";
    }
    var sel = document.getElementById("diagram-conn");
    conns.forEach(function (id) {
      var c = connById[id] || {};
      sel.appendChild(el("option", { value: String(id), text: "c" + id + " " + str(c.version) + " " + str(c.client) + " \u2192 " + str(c.server) }));
    });
    sel.addEventListener("change", function () { diagram.conn = Number(sel.value); diagram.page = 0; drawDiagram(); });
    function range() {
      var a = document.getElementById("diagram-from").value, b = document.getElementById("diagram-to").value;
      diagram.from = a === "" ? null : Number(a); diagram.to = b === "" ? null : Number(b);
      diagram.page = 0; drawDiagram();
    }
    document.getElementById("diagram-zoom").addEventListener("click", range);
    document.getElementById("diagram-reset").addEventListener("click", function () {
      document.getElementById("diagram-from").value = ""; document.getElementById("diagram-to").value = ""; range();
    });
    // the time range the plots show (panned or zoomed there) becomes the diagram's
    document.getElementById("diagram-from-plots").addEventListener("click", function () {
      if (!plotRange) return;
      document.getElementById("diagram-from").value = plotRange.start.toFixed(6);
      document.getElementById("diagram-to").value = plotRange.end.toFixed(6);
      range();
    });
    document.getElementById("diagram-prev").addEventListener("click", function () { if (diagram.page > 0) { diagram.page--; drawDiagram(); } });
    document.getElementById("diagram-next").addEventListener("click", function () { diagram.page++; drawDiagram(); });
  }

  // ---- plots (BokehJS) ----
  function plots() {
    var area = document.getElementById("plot-area");
    if (typeof Bokeh === "undefined" || !Bokeh.Plotting) {
      area.appendChild(el("p", { text: "The plotting library did not load." }));
      return;
    }
    if (UNTIMED) {
      document.getElementById("plots-about").hidden = true;
      area.appendChild(el("p", { id: "plots-untimed", text: "No plots: the log has no timestamps, so there are no rates, latencies or levels over time to draw (every frame would be at 0 s). The tables count what happened." }));
      plotsDone = true;
      return;
    }
    var P = Bokeh.Plotting;
    var duration = DATA.facts.duration || 1e-3;
    // the plots open on the time their series cover (often far less than the capture's)
    var first = Infinity, last = -Infinity;
    DATA.units.forEach(function (u) {
      Object.keys(u.series).forEach(function (k) {
        var s = u.series[k];
        if (!s) return;
        var n = (s.max || s.counts).length;  // every series kind has one of these per bucket
        first = Math.min(first, s.start); last = Math.max(last, s.start + n * s["bucket-seconds"]);
      });
    });
    DATA.windows.forEach(function (w) {
      first = Math.min(first, w.points[0][0]); last = Math.max(last, w.points[w.points.length - 1][0]);
    });
    if (!(last > first)) { first = 0; last = duration; }
    var pad = (last - first) * 0.05;
    var xr = plotRange = new Bokeh.Range1d({ start: Math.max(0, first - pad), end: last + pad });
    var figures = [];
    // axes in plain numbers (no 1.2e+5); a figure's legend beside its data, never over it
    var SECONDS = new Bokeh.BasicTickFormatter({ use_scientific: false });
    var AMOUNT = new Bokeh.NumeralTickFormatter({ format: "0,0.[000]" });
    function figure(title, ylabel, xrange, xlabel) {
      var p = P.figure({ title: title, frame_height: 140, width: 900, min_border_left: 100, x_range: xrange, x_axis_label: xlabel || "seconds from the first frame", y_axis_label: ylabel, tools: "xpan,xwheel_zoom,box_zoom,reset,save", output_backend: "canvas" });
      p.xaxis.formatter = xlabel ? AMOUNT : SECONDS;
      p.yaxis.formatter = AMOUNT;
      p.legendItems = [];
      return p;
    }
    function legend(p, label, renderers) { p.legendItems.push(new Bokeh.LegendItem({ label: label, renderers: renderers })); }
    function placeLegend(p) {
      if (p.legendItems.length) { p.add_layout(new Bokeh.Legend({ items: p.legendItems, location: "top_left", orientation: "horizontal", ncols: 3, click_policy: "hide" }), "below"); }
      return p;
    }
    function levelGlyphs(p, s, color, name, dash) {
      var xs = [], hi = [], lo = [];
      for (var i = 0; i < s.max.length; i++) {
        var x0 = s.start + i * s["bucket-seconds"];
        xs.push(x0, x0 + s["bucket-seconds"]); hi.push(s.max[i], s.max[i]); lo.push(s.min[i], s.min[i]);
      }
      legend(p, name + " (min..max)", [p.varea({ x: xs, y1: lo, y2: hi, fill_color: color, fill_alpha: 0.25 })]);
      legend(p, name + " (max)", [p.line({ x: xs, y: hi, line_color: color, line_width: 2, line_dash: dash })]);
    }
    function rateGlyphs(p, s, color, name, hatch) {
      var w = s["bucket-seconds"], left = [], right = [], top = [], bottom = [];
      s.counts.forEach(function (n, i) { left.push(s.start + i * w); right.push(s.start + (i + 1) * w); top.push(n / w); bottom.push(0); });
      legend(p, name + " per second", [p.quad({ left: left, right: right, top: top, bottom: bottom, fill_color: color, fill_alpha: 0.45, line_color: color, hatch_pattern: hatch })]);
    }
    var units = DATA.units.filter(function (u) {
      return Object.keys(u.series).some(function (k) { return u.series[k]; });
    });
    var unplotted = DATA.units.filter(function (u) { return u.plotted === false; }).length;
    if (unplotted) area.appendChild(el("p", { text: unplotted + " links and channels are not plotted: the report plots the first ones that carried deliveries (the tables list them all; --conn picks others)." }));
    // titles name a link by connection and handle (a link's name can be longer than a plot is
    // wide); this list gives each its name
    var named = units.filter(function (u) { return u.key !== u.label; });
    if (named.length) {
      area.appendChild(el("ul", { id: "plot-keys", cls: "muted" }, named.map(function (u) { return el("li", { text: u.key + ": " + (u.label.indexOf(u.key + " ") === 0 ? u.label.slice(u.key.length + 1) : u.label) }); })));
    }
    units.forEach(function (u) {
      var s = u.series;
      var levels = ["link-credit", "unsettled", "unacked"].filter(function (k) { return s[k]; });
      var rates = ["deliveries", "publishes"].filter(function (k) { return s[k]; });
      if (levels.length) {
        var p = figure(u.key + ": credit and outstanding deliveries", "count", xr);
        levels.forEach(function (k, i) { levelGlyphs(p, s[k], LANES[i][0], k, i ? "dashed" : "solid"); });
        figures.push(placeLegend(p));
      }
      if (rates.length) {
        var q = figure(u.key + ": rates, per " + fmtWidth(DATA.facts["bucket-seconds"]), "per second", xr);
        rates.forEach(function (k, i) { rateGlyphs(q, s[k], LANES[i + 2][0], k, i ? "/" : " "); });
        figures.push(placeLegend(q));
      }
      var latencies = ["settle-latency", "ack-latency", "confirm-latency"].filter(function (k) { return s[k]; });
      if (latencies.length) {
        var l = figure(u.key + ": latency by when each settled", "milliseconds", xr);
        latencies.forEach(function (k, i) {
          var d = s[k], w = d["bucket-seconds"], xs = [], hi = [], mean = [], at = [];
          d.counts.forEach(function (n, j) {
            var x = d.start + (j + 0.5) * w;
            at.push(x); mean.push(n ? d["mean-ms"][j] : NaN);  // NaN: the line breaks over an interval with none
            if (n) { xs.push(x); hi.push(d["max-ms"][j]); }
          });
          var colour = LANES[i + 4][0];
          legend(l, k + " (longest)", [l.scatter({ x: xs, y: hi, marker: i ? "triangle" : "circle", size: 7, fill_color: colour, line_color: colour })]);
          legend(l, k + " (mean)", [l.line({ x: at, y: mean, line_color: colour, line_width: 1.5, line_dash: i ? "dashed" : "solid" })]);
        });
        figures.push(placeLegend(l));
      }
      Object.keys(u.histograms).forEach(function (name) {
        var h = u.histograms[name];
        if (!h) return;
        var hx = new Bokeh.Range1d({ start: Math.max(0, h.low - h.width), end: h.low + h.width * (h.counts.length + 1) });
        var r = figure(u.key + ": " + name + " histogram", "how many", hx, name + " (ms)");
        var left = [], right = [], top = [], bottom = [];
        h.counts.forEach(function (n, i) { left.push(h.low + i * h.width); right.push(h.low + (i + 1) * h.width); top.push(n); bottom.push(0); });
        r.quad({ left: left, right: right, top: top, bottom: bottom, fill_color: "#455a64", line_color: "#000000" });
        figures.push(r);
      });
    });
    if (DATA.windows.length) {
      var w = figure("Session windows: incoming-window as each side stated it", "transfers", xr);
      DATA.windows.forEach(function (ws, i) {
        var xs = ws.points.map(function (p) { return p[0]; }), ys = ws.points.map(function (p) { return p[1]; });
        xs.push(duration); ys.push(ys[ys.length - 1]);
        var lane = LANES[i % LANES.length];
        legend(w, "c" + ws.conn + " s" + ws.channel + " " + ws.dir, [w.step({ x: xs, y: ys, mode: "after", line_color: lane[0], line_width: 2, line_dash: lane[1] ? lane[1].split(" ").map(Number) : "solid" })]);
      });
      figures.push(placeLegend(w));
    }
    if (!figures.length) {
      area.appendChild(el("p", { text: "No link or channel carried deliveries to plot." }));
      plotsDone = true;
      return;
    }
    var column = new Bokeh.Column({ children: figures });
    P.show(column, area).then(function () { plotsDone = true; document.body.setAttribute("data-plots", String(figures.length)); });
  }

  // ---- tables ----
  function unitTable(id, kind) {
    var table = document.getElementById(id);
    var units = DATA.units.filter(function (u) { return u.kind === kind; });
    if (!units.length) { table.parentNode.hidden = true; return; }
    var head = el("tr", {}, [el("th", { scope: "col", text: "conn" })]);
    DATA.columns[kind].forEach(function (c) { head.appendChild(el("th", { scope: "col", text: c })); });
    table.querySelector("thead").appendChild(head);
    var body = table.querySelector("tbody");
    units.forEach(function (u) {
      var tr = el("tr", {}, [el("td", { text: "c" + u.conn })]);
      u.cells.forEach(function (v) { tr.appendChild(el("td", { text: str(v) })); });
      body.appendChild(tr);
    });
    var search = document.getElementById(id + "-search");
    search.addEventListener("input", function () {
      var q = search.value.toLowerCase();
      Array.prototype.forEach.call(body.rows, function (tr) { tr.hidden = q !== "" && tr.textContent.toLowerCase().indexOf(q) < 0; });
    });
  }
  // ---- the frame list: paged, filtered with -Y (filter.js) over every frame's record ----
  var frameList = { page: 0, matches: null, query: "", selected: null };
  function frameRows() {
    var q = frameList.query.toLowerCase(), matches = frameList.matches;
    var out = [];
    for (var i = 0; i < ROWS.length; i++) {
      var r = ROWS[i];
      if (matches && !matches[i]) continue;
      if (q && (r[5] + " " + r[6] + " " + r[8].join(" ") + " c" + r[2]).toLowerCase().indexOf(q) < 0) continue;
      out.push(r);
    }
    return out;
  }
  function drawFrames() {
    var rows = frameRows();
    var pages = Math.max(1, Math.ceil(rows.length / ROWS_PER_PAGE));
    frameList.page = Math.max(0, Math.min(frameList.page, pages - 1));
    document.getElementById("frames-page").textContent = "page " + (frameList.page + 1) + " of " + pages + " (" + rows.length + " frames)";
    var body = document.querySelector("#frames tbody");
    clear(body);
    rows.slice(frameList.page * ROWS_PER_PAGE, (frameList.page + 1) * ROWS_PER_PAGE).forEach(function (r) {
      var cls = (r[7] & F_ERROR ? "error" : "") + (r[0] === frameList.selected ? " chosen" : "");
      var tr = el("tr", { tabindex: "0", "data-frame": String(r[0]), cls: cls }, [
        el("td", { text: String(r[0]) }), el("td", { text: fmtTime(r[1]) }), el("td", { text: "c" + r[2] }),
        el("td", { text: r[3] === "c2s" ? "\u2192" : r[3] === "s2c" ? "\u2190" : "" }), el("td", { text: str(r[4]) }),
        el("td", { text: r[5] }), el("td", { text: r[6] }), el("td", { text: r[8].join(", ") })
      ]);
      tr.addEventListener("click", function () { goToFrame(r[0]); });
      tr.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter") goToFrame(r[0]);
        else if (ev.key === "ArrowDown" && tr.nextSibling) { ev.preventDefault(); tr.nextSibling.focus(); }
        else if (ev.key === "ArrowUp" && tr.previousSibling) { ev.preventDefault(); tr.previousSibling.focus(); }
      });
      body.appendChild(tr);
    });
  }
  /* the records left out to keep the page under 5 MB (page.py): what a filter cannot see */
  function recordsNote() {
    var kept = DATA.facts.records;
    if (kept === "no messages") return " The page's records have no messages (kept under 5 MB): a filter on message.… sees none; amqpscope read -Y sees them.";
    if (kept === "frame keys only") return " The page's records have no fields or messages (kept under 5 MB): a filter on them sees none; amqpscope read -Y sees them.";
    return "";
  }
  /* -Y as the command line takes it: an error as its text, a caret under its column, and
   * amqpscope's own words for it */
  function applyFilter(text) {
    var box = document.getElementById("frames-filter-error"), status = document.getElementById("frames-filter-status");
    if (!/\S/.test(text)) {  // blank: no filter (the text goes to the parser as typed)
      frameList.matches = null;
      box.hidden = true;
      status.textContent = "No display filter: every frame is listed (" + ROWS.length + ")." + recordsNote();
      frameList.page = 0; drawFrames();
      return true;
    }
    var predicate;
    try {
      predicate = amqpscopeFilter.compile(text);
    } catch (exc) {
      if (!(exc instanceof amqpscopeFilter.FilterError)) throw exc;
      box.textContent = text + "\n" + " ".repeat(exc.column - 1) + "^\n-Y: " + exc.message;
      box.hidden = false;
      document.getElementById("frames-filter").setAttribute("aria-invalid", "true");
      return false;
    }
    document.getElementById("frames-filter").removeAttribute("aria-invalid");
    var matches = new Uint8Array(ROWS.length), count = 0;
    if (text === DATA.facts.filter) {  // -Y given to report: as it was applied when made
      ROWS.forEach(function (r, i) { if (r[7] & F_MATCH) { matches[i] = 1; count++; } });
    } else {
      RECORDS.forEach(function (record, i) { if (predicate(record)) { matches[i] = 1; count++; } });
    }
    frameList.matches = matches;
    frameList.text = text;
    box.hidden = true;
    status.textContent = count + " of " + ROWS.length + " frames match." + recordsNote();
    frameList.page = 0; drawFrames();
    return true;
  }
  function filterMatches(text) {  // for tests: the frame numbers a filter keeps, or its error
    try {
      var predicate = amqpscopeFilter.compile(text), out = [];
      RECORDS.forEach(function (record, i) { if (predicate(record)) out.push(ROWS[i][0]); });
      return out;
    } catch (exc) {
      if (exc instanceof amqpscopeFilter.FilterError) return exc.message;
      throw exc;
    }
  }
  function showFrameInList(n) {
    var rows = frameRows();
    for (var k = 0; k < rows.length; k++) {
      if (rows[k][0] === n) { frameList.page = Math.floor(k / ROWS_PER_PAGE); break; }
    }
    frameList.selected = n;
    drawFrames();
  }
  function frameControls() {
    var input = document.getElementById("frames-filter");
    input.value = DATA.facts.filter || "";
    input.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { ev.preventDefault(); applyFilter(input.value); } });
    document.getElementById("frames-filter-apply").addEventListener("click", function () { applyFilter(input.value); });
    document.getElementById("frames-filter-clear").addEventListener("click", function () { input.value = ""; applyFilter(""); });
    var search = document.getElementById("frames-search");
    search.addEventListener("input", function () { frameList.query = search.value; frameList.page = 0; drawFrames(); });
    document.getElementById("frames-first").addEventListener("click", function () { frameList.page = 0; drawFrames(); });
    document.getElementById("frames-prev").addEventListener("click", function () { if (frameList.page > 0) { frameList.page--; drawFrames(); } });
    document.getElementById("frames-next").addEventListener("click", function () { frameList.page++; drawFrames(); });
    document.getElementById("frames-last").addEventListener("click", function () { frameList.page = Infinity; drawFrames(); });
    var go = document.getElementById("frames-go");
    go.addEventListener("keydown", function (ev) {
      if (ev.key !== "Enter") return;
      ev.preventDefault();
      var n = Number(go.value);
      if (rowByNumber[n] === undefined) { document.getElementById("frames-page").textContent = "no frame " + go.value + " in this report"; return; }
      showFrameInList(n);
      goToFrame(n);
    });
    applyFilter(input.value);
  }

  overview();
  var plotsDone = false, plotRange = null;
  // first: BokehJS lays its figures out while the page is small (drawn after the tables and
  // the diagram it took longer, 116 s against 62 s for the 610-connection bench page)
  try { plots(); } catch (e) { console.error("plots: " + e); }
  window.amqpscopeReport = {
    goToFrame: goToFrame,
    plotsDone: function () { return plotsDone; },
    plotRange: function () { return plotRange; },
    rows: function () { return ROWS; },
    records: function () { return RECORDS; },
    filterMatches: filterMatches,
    applyFilter: applyFilter,
    shownFrames: function () { return frameRows().map(function (r) { return r[0]; }); }
  };
  loadFrames().then(function () {
    indexFrames();
    diagram.conn = conns.length ? conns[0] : null;
    diagramControls();
    drawDiagram();
    unitTable("links", "link");
    unitTable("channels", "channel");
    frameControls();
    document.body.setAttribute("data-ready", "1");
  }).catch(function (e) {
    console.error("frames: " + e);
    document.getElementById("diagram-svg").appendChild(el("p", { text: "The frames could not be unpacked: " + e }));
  });
})();
