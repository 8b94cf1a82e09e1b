/* tilefit HTML report. Draws the page from the JSON in #report-data (tilefit.audit.model.Audit);
   no network, no libraries. Views (the URL fragment): #summary, #matrix[?filters], #t<index>. */
"use strict";
(function () {
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var COLS = D.columns, TABLES = D.tables, CONFIGS = D.configs, FIXES = D.fixes, V = D.verdicts;
  var RANK = { o: 0, u: 1, f: 2, n: 3, x: 4 };
  var ROOT = (D.meta && D.meta.root) || "";
  TABLES.forEach(function (t, i) {
    t.i = i;
    t.full = ROOT + t.p;
    t.cells = {};
    t.c.forEach(function (c) { t.cells[c[0]] = { col: c[0], v: c[1], val: c[2], over: c[3] }; });
    t.why_no_fix = {};
    if (t.nofix) Object.keys(t.nofix).forEach(function (why) { t.nofix[why].forEach(function (k) { t.why_no_fix[k] = why; }); });
  });
  // needs: group -> config -> per column the bytes (verdict implied by the limit) or [bytes, verdict]
  function needOf(g, col, cfg) {
    var rows = D.needs[g], row = rows ? rows[cfg] : null, x = row ? row[col] : null;
    if (x === null || x === undefined) return null;
    if (typeof x === "number") return { b: x, v: x > COLS[col].limit ? "o" : "f" };
    return { b: x[0], v: x[1] };
  }
  var main = document.getElementById("main");

  // ---------------------------------------------------------------- helpers
  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, function (ch) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[ch];
    });
  }
  function kib(n) { return (n / 1024).toFixed(n < 10240 ? 1 : 0) + "K"; }
  function bytes(n) { return n == null ? "?" : String(n).replace(/\B(?=(\d{3})+(?!\d))/g, "\u2009") + " B"; }
  function cfgText(c) {
    if (c === null || typeof c !== "object" || Array.isArray(c)) return JSON.stringify(c);
    if ("BLOCK_SIZE_M" in c) {
      var s = c.BLOCK_SIZE_M + "x" + c.BLOCK_SIZE_N + "x" + c.BLOCK_SIZE_K;
      if ("GROUP_SIZE_M" in c) s += " G" + c.GROUP_SIZE_M;
      s += " w" + ("num_warps" in c ? c.num_warps : "-") + " s" + ("num_stages" in c ? c.num_stages : "-");
      var known = { BLOCK_SIZE_M: 1, BLOCK_SIZE_N: 1, BLOCK_SIZE_K: 1, GROUP_SIZE_M: 1, num_warps: 1, num_stages: 1 };
      Object.keys(c).forEach(function (k) { if (!known[k]) s += " " + k + "=" + JSON.stringify(c[k]); });
      return s;
    }
    return Object.keys(c).map(function (k) { return k + "=" + JSON.stringify(c[k]); }).join(" ");
  }
  function need(t, col, e, j) {
    if (t.ec && t.ec[j] !== col) return null;
    if (t.g === null || t.g === undefined) return null;
    return needOf(t.g, col, e[1]);
  }
  // colour buckets (report.css: .f0-.f5 greener with more headroom, .o0-.o4 darker further over)
  function shade(v, val, limit) {
    var f = Math.max(0, Math.min(1, (val || 0) / (limit || 1)));
    if (v === "o") return " o" + Math.min(4, Math.floor(f * 5));
    if (v === "f") return " f" + Math.min(5, Math.floor(Math.sqrt(f) * 6));
    return "";
  }
  function cellTitle(t, col) {
    var c = t.cells[col], C = COLS[col];
    if (!c) return t.why ? "not checked: " + t.why : "";
    if (c.v === "o") return "overflows " + C.label + " by " + c.val + " B (" + c.over + " of " + t.en.length + " entries; limit " + C.limit + " B)";
    if (c.v === "f") return "fits " + C.label + ": " + c.val + " B to spare at the tightest entry (limit " + C.limit + " B)";
    if (c.v === "u") return "undecided on " + C.label + ": an estimate lies within its error bound of the limit";
    if (c.v === "n") return "not applicable on " + C.label + ": Triton cannot compile this dtype for " + C.arch;
    return "not checked on " + C.label;
  }
  // A cell of the matrix; ``titled``: with its tooltip (the matrix sets tooltips on hover, to
  // keep the rows it draws small)
  function cellHtml(t, col, titled) {
    var c = t.cells[col];
    var title = titled ? " title=\"" + esc(cellTitle(t, col)) + "\"" : "";
    if (!c && t.why) return "<td class=\"c x\"" + title + ">\u2013</td>";
    if (!c) return "<td class=\"c none\"></td>";
    var C = COLS[col], text;
    if (c.v === "o") text = "+" + kib(c.val) + (c.over > 1 ? " \u00d7" + c.over : "");
    else if (c.v === "f") text = kib(c.val);
    else if (c.v === "u") text = "?";
    else if (c.v === "n") text = "n/a";
    else text = "\u2013";
    return "<td class=\"c " + c.v + shade(c.v, c.val, C.limit) + "\"" + title + ">" + esc(text) + "</td>";
  }
  function link(t, short) { return "<a href=\"#t" + t.i + "\">" + esc(short ? t.p : t.full) + "</a>"; }
  function verdictWord(v) { return V[v] || v; }
  function ratioHtml(r) {
    if (r === null || r === undefined) return "\u2013";
    var pct = (r - 1) * 100;
    if (Math.abs(pct) < 0.5) return "1.00\u00d7 (same)";
    var cls = pct > 0 ? "slower" : "faster";
    return "<span class=\"" + cls + "\">" + r.toFixed(2) + "\u00d7 (" + Math.abs(pct).toFixed(0) + " % " + cls + ")</span>";
  }
  function setNav(view, label) {
    ["summary", "matrix", "table"].forEach(function (v) {
      document.getElementById("nav-" + v).className = v === view ? "active" : "";
    });
    var nt = document.getElementById("nav-table");
    if (view === "table") { nt.hidden = false; nt.textContent = label; nt.href = location.hash; } else { nt.hidden = true; }
  }
  function targetCols() { return COLS.filter(function (c) { return c.target; }); }
  function ownCol(t) { return t.own === null || t.own === undefined ? null : t.own; }

  // ---------------------------------------------------------------- header
  (function () {
    var m = D.meta || {}, bits = [];
    if (m.tool) bits.push(esc(m.tool));
    if (m.estimator) bits.push("estimator " + esc(m.estimator));
    if (m.triton) bits.push("Triton model " + esc(m.triton));
    if (m.generated) bits.push("generated " + esc(m.generated));
    if (m.command) bits.push("<code>" + esc(m.command) + "</code>");
    document.getElementById("meta").innerHTML = bits.join(" \u00b7 ");
  })();

  // ---------------------------------------------------------------- summary
  function stack(counts, total) {
    var order = [["o", "var(--over)"], ["u", "var(--unc)"], ["f", "var(--fit)"], ["n", "var(--na)"]];
    return "<span class=\"stack\">" + order.map(function (o) {
      var w = total ? 160 * (counts[o[0]] || 0) / total : 0;
      return w ? "<i style=\"width:" + w.toFixed(1) + "px;background:" + o[1] + "\"></i>" : "";
    }).join("") + "</span>";
  }
  function renderSummary() {
    setNav("summary");
    var S = D.summary, h = [];
    var what = D.kind === "doctor" ? "kernels" : "tables", cls = D.kind === "doctor" ? "target" : "device class";
    h.push("<h2 id=\"summary\">Summary</h2>");
    h.push("<div class=\"cards\">");
    h.push("<div class=\"card\"><div class=\"big\">" + S.checked + "</div>" + what + " checked (of " + S.tables + "), " + S.entries + " entries</div>");
    h.push("<div class=\"card " + (S.tables_over ? "bad" : "good") + "\"><div class=\"big\">" + S.tables_over + "</div>" + what + " overflow on some " + cls + "</div>");
    h.push("<div class=\"card " + (S.entries_over ? "bad" : "good") + "\"><div class=\"big\">" + S.entries_over + "</div>entries overflow</div>");
    if (D.kind === "check") {
      var fx = S.fixes;
      h.push("<div class=\"card\"><div class=\"big\">" + fx.entries + "</div>entries the fixer would change in " + fx.files + " files (" + fx.safe + " safe, " + fx.unsafe + " unsafe)</div>");
    }
    h.push("</div>");
    if (D.extra && D.extra.summary_lines) {
      h.push("<ul>" + D.extra.summary_lines.map(function (l) { return "<li>" + esc(l) + "</li>"; }).join("") + "</ul>");
    }
    h.push("<h2>Per " + cls + "</h2>");
    h.push("<table class=\"data\" id=\"per-class\"><thead><tr><th>" + cls + "</th><th>arch</th><th class=\"num\">limit</th>" +
      "<th class=\"num\">overflow</th><th class=\"num\">undecided</th><th class=\"num\">fit</th><th class=\"num\">n/a</th>" +
      "<th class=\"num\">not checked</th><th class=\"num\">entries over</th><th></th></tr></thead><tbody>");
    S.columns.forEach(function (pc) {
      var C = COLS[pc.column], t = pc.tables, total = t.o + t.u + t.f + t.n + t.x;
      if (!total) return;
      var over = t.o ? "<a href=\"#matrix?col=" + C.id + "&amp;status=o\">" + t.o + "</a>" : "0";
      h.push("<tr><td title=\"" + esc(C.names.join(", ")) + "\">" + esc(C.label) + (C.target ? "" : " <span class=\"pill\">own device only</span>") +
        "</td><td>" + esc(C.arch) + "</td><td class=\"num\">" + (C.limit == null ? "?" : bytes(C.limit)) + "</td><td class=\"num\">" + over +
        "</td><td class=\"num\">" + t.u + "</td><td class=\"num\">" + t.f + "</td><td class=\"num\">" + t.n + "</td><td class=\"num\">" + t.x +
        "</td><td class=\"num\">" + pc.entries_over + "</td><td>" + stack(t, total) + "</td></tr>");
    });
    h.push("</tbody></table>");
    h.push("<h2>Worst overflows</h2>");
    if (!S.worst.length) {
      h.push("<p>No entry overflows any device class checked.</p>");
    } else {
      h.push("<table class=\"data\" id=\"worst\"><thead><tr><th>" + (D.kind === "doctor" ? "kernel" : "table") + "</th><th>" +
        (D.kind === "doctor" ? "batch sizes" : "batch") + "</th><th>device class</th><th class=\"num\">needs</th><th class=\"num\">limit</th><th class=\"num\">over by</th><th>fix</th></tr></thead><tbody>");
      S.worst.forEach(function (w) {
        var t = TABLES[w.t], C = COLS[w.col], fx = t.fx && t.fx[w.k] !== undefined ? FIXES[t.fx[w.k]] : null;
        h.push("<tr><td>" + link(t) + "</td><td class=\"num\">" + esc(w.k) + "</td><td>" + esc(C.label) + " <span class=\"muted\">" + esc(C.arch) + "</span></td><td class=\"num\">" +
          bytes(w.bytes) + "</td><td class=\"num\">" + bytes(C.limit) + "</td><td class=\"num\">" + bytes(w.over) + "</td><td class=\"cfg\">" +
          (fx ? esc(cfgText(CONFIGS[fx.old])) + " \u2192 " + esc(cfgText(CONFIGS[fx.new])) : (t.why_no_fix[w.k] ? esc(t.why_no_fix[w.k]) : "\u2013")) + "</td></tr>");
      });
      h.push("</tbody></table>");
    }
    if (D.kind === "check") {
      h.push("<h2>" + (D.meta.fixes_applied ? "What the fixer changed" : "What the fixer would change") + "</h2>");
      var fx2 = S.fixes;
      if (D.meta.fixes_applied) {
        h.push("<p id=\"fixes-applied\"><b>Fixes were applied</b>: <code>--fix</code> rewrote the files, and the matrix shows them as they are now; each table's page lists the old and new configs.</p>");
      }
      if (!D.meta.planned_fixes) {
        h.push("<p>Fixes were not planned for this report.</p>");
      } else if (!fx2.entries) {
        h.push("<p>No entry needs a change" + (fx2.no_fix ? "; " + fx2.no_fix + " overflowing entries have no fix within the search" : "") + ".</p>");
      } else {
        h.push("<p>" + fx2.entries + " entries in " + fx2.files + " files get the fastest config that fits every device class of their table (" +
          fx2.safe + " safe: same sums in the same order; " + fx2.unsafe + " unsafe: BLOCK_SIZE_K changes the accumulation order)" +
          (fx2.no_fix ? "; " + fx2.no_fix + " overflowing entries have no fix" : "") +
          ". Speeds are the performance model's predictions, not measurements. <code>tilefit check \u2026 --fix</code> applies them (<code>--diff</code> previews).</p>");
        var perFile = {};
        FIXES.forEach(function (f) { (perFile[f.t] = perFile[f.t] || []).push(f); });
        h.push("<table class=\"data\" id=\"fix-files\"><thead><tr><th>table</th><th class=\"num\">entries changed</th><th>changes</th><th>predicted vs original on its own device</th></tr></thead><tbody>");
        Object.keys(perFile).slice(0, 50).forEach(function (ti) {
          var fs = perFile[ti], t = TABLES[ti], kinds = {};
          fs.forEach(function (f) { Object.keys(f.ch).forEach(function (k) { kinds[k] = 1; }); });
          var rs = fs.map(function (f) { return f.vsOld; }).filter(function (r) { return r !== null && r !== undefined; });
          var gm = rs.length ? Math.exp(rs.reduce(function (a, r) { return a + Math.log(r); }, 0) / rs.length) : null;
          h.push("<tr><td>" + link(t) + "</td><td class=\"num\">" + fs.length + "</td><td>" + esc(Object.keys(kinds).join(", ")) + "</td><td>" +
            (gm === null ? "\u2013" : "geomean " + ratioHtml(gm)) + "</td></tr>");
        });
        h.push("</tbody></table>");
        if (Object.keys(perFile).length > 50) h.push("<p class=\"note\">\u2026 and " + (Object.keys(perFile).length - 50) + " more files.</p>");
      }
    }
    if (D.meta.python_diagnostics) h.push("<p class=\"note\">" + D.meta.python_diagnostics + " diagnostics of Python call sites are not drawn here; see the text report.</p>");
    main.innerHTML = h.join("");
  }

  // ---------------------------------------------------------------- matrix
  var F = { q: "", engine: "", kernel: "", dtype: "", col: "", status: "", sort: "group", asc: false };
  function parseQuery(q) {
    var out = {};
    (q || "").split("&").forEach(function (kv) {
      if (!kv) return;
      var p = kv.split("=");
      out[decodeURIComponent(p[0])] = decodeURIComponent((p[1] || "").replace(/\+/g, " "));
    });
    return out;
  }
  function val(t, key) { return t[key] == null || t[key] === "" ? "~" : String(t[key]); }
  function distinct(key) {
    var s = {};
    TABLES.forEach(function (t) { s[val(t, key)] = 1; });
    return Object.keys(s).sort();
  }
  function optionList(id, label, values, current, names) {
    return "<label>" + label + " <select id=\"" + id + "\"><option value=\"\">all</option>" + values.map(function (v) {
      var text = names ? names(v) : (v === "~" ? "(none)" : v);
      return "<option value=\"" + esc(v) + "\"" + (current !== "" && String(v) === String(current) ? " selected=\"selected\"" : "") + ">" + esc(text) + "</option>";
    }).join("") + "</select></label>";
  }
  function shownCols() {
    var cs = targetCols().map(function (c) { return c.id; });
    if (F.col !== "" && F.col !== "own") cs = cs.filter(function (c) { return String(c) === String(F.col); });
    if (F.col === "own") cs = [];
    return cs;
  }
  function rowCell(t, col) { return col === "own" ? (ownCol(t) === null ? null : t.cells[ownCol(t)]) : t.cells[col]; }
  function statusMatch(t) {
    if (!F.status) return true;
    var cs = F.col === "" ? Object.keys(t.cells).map(Number) : F.col === "own" ? (ownCol(t) === null ? [] : [ownCol(t)]) : [Number(F.col)];
    var vs = cs.map(function (c) { return t.cells[c] ? t.cells[c].v : "x"; });
    if (F.status === "f") return vs.length > 0 && vs.every(function (v) { return v === "f" || v === "n"; }) && vs.indexOf("f") >= 0;
    if (F.status === "x") return vs.length === 0 || vs.indexOf("x") >= 0;
    return vs.indexOf(F.status) >= 0;
  }
  function visible(t) {
    if (F.engine && val(t, "e") !== F.engine) return false;
    if (F.kernel && val(t, "k") !== F.kernel) return false;
    if (F.dtype && val(t, "d") !== F.dtype) return false;
    if (F.q && t.full.toLowerCase().indexOf(F.q.toLowerCase()) < 0) return false;
    return statusMatch(t);
  }
  function badness(c) {
    if (!c) return -3e9;
    if (c.v === "o") return 1e9 + c.val;
    if (c.v === "u") return 5e8;
    if (c.v === "f") return -c.val;
    if (c.v === "n") return -1e9;
    return -2e9;
  }
  function groupKey(t) { return [t.e || "any engine", t.k, t.d || "bf16"].join(" \u00b7 "); }
  function sortedRows(rows) {
    var cmp;
    if (F.sort === "group" || F.sort === "path") {
      cmp = function (a, b) { return a.p < b.p ? -1 : a.p > b.p ? 1 : 0; };
    } else {
      var col = F.sort === "own" ? "own" : Number(F.sort);
      cmp = function (a, b) { return (badness(rowCell(b, col)) - badness(rowCell(a, col))) || (a.p < b.p ? -1 : 1); };
    }
    rows = rows.slice().sort(cmp);
    if (F.asc) rows.reverse();
    if (F.sort !== "group") return rows;
    var groups = {}, order = [];
    rows.forEach(function (t) { var g = groupKey(t); if (!groups[g]) { groups[g] = []; order.push(g); } groups[g].push(t); });
    order.sort();
    var out = [];
    order.forEach(function (g) { out.push({ group: g, n: groups[g].length }); groups[g].forEach(function (t) { out.push(t); }); });
    return out;
  }
  function writeHash() {
    var q = [];
    ["q", "engine", "kernel", "dtype", "col", "status"].forEach(function (k) { if (F[k] !== "") q.push(k + "=" + encodeURIComponent(F[k])); });
    if (F.sort !== "group") q.push("sort=" + encodeURIComponent(F.sort));
    if (F.asc) q.push("asc=1");
    var h = "#matrix" + (q.length ? "?" + q.join("&") : "");
    if (location.hash !== h) {
      try { history.replaceState(null, "", h); } catch (e) { /* some file:// setups refuse: the view still works */ }
    }
  }
  function renderMatrix(query) {
    setNav("matrix");
    var p = parseQuery(query);
    F = { q: p.q || "", engine: p.engine || "", kernel: p.kernel || "", dtype: p.dtype || "", col: p.col || "",
      status: p.status || "", sort: p.sort || "group", asc: p.asc === "1" };
    var h = [];
    h.push("<div class=\"filters\" id=\"filters\">");
    h.push("<label>path <input id=\"f-q\" type=\"search\" placeholder=\"filter by path\" value=\"" + esc(F.q) + "\" /></label>");
    h.push(optionList("f-engine", "engine", distinct("e"), F.engine));
    h.push(optionList("f-kernel", D.kind === "doctor" ? "kernel" : "family", distinct("k"), F.kernel));
    h.push(optionList("f-dtype", "dtype", distinct("d"), F.dtype));
    var colVals = targetCols().map(function (c) { return String(c.id); });
    if (D.kind === "check") colVals.unshift("own");
    h.push(optionList("f-col", "device", colVals, F.col, function (v) { return v === "own" ? "the table's own device" : COLS[v].label + " (" + COLS[v].arch + ")"; }));
    h.push(optionList("f-status", "status", ["o", "u", "f", "n", "x"], F.status, function (v) { return v === "f" ? "fits (every class shown)" : verdictWord(v); }));
    h.push("<span id=\"count\"></span></div>");
    h.push("<div class=\"legend\"><span><span class=\"sw c o o2\"></span>overflows by N bytes (\u00d7 entries)</span>" +
      "<span><span class=\"sw c f f0\"></span>fits, little headroom</span>" +
      "<span><span class=\"sw c f f5\"></span>fits, ample headroom (bytes to spare)</span>" +
      "<span><span class=\"sw\" style=\"background:var(--unc)\"></span>undecided</span>" +
      "<span><span class=\"sw\" style=\"background:var(--na)\"></span>not applicable</span>" +
      "<span><span class=\"sw\" style=\"background:var(--unchecked)\"></span>not checked</span>" +
      "<span>Click a header to sort, a row to open its page.</span></div>");
    h.push("<div class=\"matrix-wrap\" id=\"matrix-wrap\"><table class=\"matrix\" id=\"matrix\"><colgroup id=\"mcols\"></colgroup><thead id=\"mhead\"></thead><tbody id=\"mbody\"></tbody></table></div>");
    main.innerHTML = h.join("");
    document.getElementById("matrix-wrap").addEventListener("scroll", onScroll);
    ["f-engine", "f-kernel", "f-dtype", "f-col", "f-status"].forEach(function (id) {
      document.getElementById(id).addEventListener("change", function (ev) { F[id.slice(2)] = ev.target.value; drawRows(); });
    });
    document.getElementById("f-q").addEventListener("input", function (ev) { F.q = ev.target.value; drawRows(); });
    document.getElementById("mhead").addEventListener("click", function (ev) {
      var th = ev.target.closest("th");
      if (!th || !th.dataset.sort) return;
      if (F.sort === th.dataset.sort) { F.asc = !F.asc; } else { F.sort = th.dataset.sort; F.asc = false; }
      drawRows();
    });
    document.getElementById("mbody").addEventListener("mouseover", function (ev) {
      var td = ev.target.closest("td"), tr = td && td.parentNode;
      if (!td || td.title || !tr.dataset || tr.dataset.i === undefined) return;
      var t = TABLES[Number(tr.dataset.i)], k = td.cellIndex;
      if (k === 0) td.title = t.full + (t.why ? " \u2014 " + t.why : "");
      else if (M.withOwn && k === 1) td.title = ownCol(t) === null ? "the file name names no known device" : "own device: " + cellTitle(t, ownCol(t));
      else td.title = cellTitle(t, M.cols[k - (M.withOwn ? 2 : 1)]);
    });
    document.getElementById("mbody").addEventListener("click", function (ev) {
      if (ev.target.closest("a")) return;
      var tr = ev.target.closest("tr.row");
      if (tr) location.hash = "#t" + tr.dataset.i;
    });
    drawRows();
  }
  function drawRows() {
    writeHash();
    var cols = shownCols(), withOwn = D.kind === "check";
    var sortCls = function (key) { return F.sort === key ? " sorted" + (F.asc ? " asc" : "") : ""; };
    var hh = ["<tr><th class=\"path" + sortCls(F.sort === "group" ? "group" : "path") + "\" data-sort=\"" + (F.sort === "group" ? "path" : "group") +
      "\" title=\"sort by path (click again: grouped by engine, kernel, dtype)\">" + (D.kind === "doctor" ? "engine / kernel" : "table" +
      (ROOT ? " <span class=\"arch\">under " + esc(ROOT) + "</span>" : "")) + "</th>"];
    if (withOwn) hh.push("<th class=\"" + sortCls("own") + "\" data-sort=\"own\" title=\"the device the file name names\">own device<span class=\"arch\">as named</span></th>");
    cols.forEach(function (c) {
      var C = COLS[c];
      hh.push("<th class=\"" + sortCls(String(c)) + "\" data-sort=\"" + c + "\" title=\"" + esc(C.names.join(", ") + " \u2014 " + C.arch + ", " + C.limit + " B per block") + "\">" +
        esc(C.label) + "<span class=\"arch\">" + esc(C.arch) + " \u00b7 " + (C.limit == null ? "?" : kib(C.limit)) + "</span></th>");
    });
    hh.push("</tr>");
    document.getElementById("mhead").innerHTML = hh.join("");
    var rows = TABLES.filter(visible);
    M = { items: sortedRows(rows), cols: cols, withOwn: withOwn, ncol: cols.length + (withOwn ? 2 : 1), first: -1, last: -1 };
    var cg = "<col style=\"width:" + PATH_W + "px\" />";
    for (var k = 1; k < M.ncol; k++) cg += "<col style=\"width:" + CELL_W + "px\" />";
    document.getElementById("mcols").innerHTML = cg;
    document.getElementById("matrix").style.width = (PATH_W + CELL_W * (M.ncol - 1)) + "px";
    document.getElementById("count").textContent = rows.length + " of " + TABLES.length + (D.kind === "doctor" ? " kernels" : " tables");
    paintRows(true);
  }
  // The matrix draws only the rows in view (and a margin): a table of the corpus against every
  // class has ~27,000 cells, and laying them all out takes seconds. Rows have one fixed height.
  var ROW_H = 22, PATH_W = 460, CELL_W = 92, MARGIN_ROWS = 12, M = null, painting = false, measured = false;
  function rowHtml(t) {
    if (t.group !== undefined) return "<tr class=\"grp\"><td colspan=\"" + M.ncol + "\">" + esc(t.group) + " <span class=\"muted\">(" + t.n + ")</span></td></tr>";
    var r = "<tr class=\"row\" data-i=\"" + t.i + "\"><td class=\"path\">" + link(t, true) + "</td>";
    if (M.withOwn) r += ownCol(t) === null ? "<td class=\"c x\">\u2013</td>" : cellHtml(t, ownCol(t), false);
    for (var j = 0; j < M.cols.length; j++) r += cellHtml(t, M.cols[j], false);
    return r + "</tr>";
  }
  function paintRows(force) {
    var wrap = document.getElementById("matrix-wrap"), body = document.getElementById("mbody");
    if (!wrap || !body || !M) return;
    var n = M.items.length;
    if (!n) { body.innerHTML = "<tr><td class=\"empty\" colspan=\"" + M.ncol + "\">No table matches the filters.</td></tr>"; return; }
    var first = Math.max(0, Math.floor(wrap.scrollTop / ROW_H) - MARGIN_ROWS);
    // the box grows with its rows up to its maximum height: size the window by that
    var last = Math.min(n, first + Math.ceil(boxHeight(wrap) / ROW_H) + 2 * MARGIN_ROWS);
    if (!force && first === M.first && last === M.last) return;
    M.first = first; M.last = last;
    var out = [];
    if (first) out.push("<tr class=\"spacer\" style=\"height:" + first * ROW_H + "px\"><td colspan=\"" + M.ncol + "\"></td></tr>");
    for (var i = first; i < last; i++) out.push(rowHtml(M.items[i]));
    if (last < n) out.push("<tr class=\"spacer\" style=\"height:" + (n - last) * ROW_H + "px\"><td colspan=\"" + M.ncol + "\"></td></tr>");
    body.innerHTML = out.join("");
    if (!measured) {  // the spacers assume every row is ROW_H high: take the real height once
      var r = body.querySelector("tr.row");
      if (r && r.offsetHeight) {
        measured = true;
        if (r.offsetHeight !== ROW_H) { ROW_H = r.offsetHeight; paintRows(true); }
      }
    }
  }
  function boxHeight(wrap) {
    var max = parseFloat(getComputedStyle(wrap).maxHeight);
    return Math.max(wrap.clientHeight, isFinite(max) ? max : (window.innerHeight || 800));
  }
  function onScroll() {
    if (painting) return;
    painting = true;
    requestAnimationFrame(function () { painting = false; paintRows(false); });
  }

  // ---------------------------------------------------------------- a table's page
  function chart(t, col, fixAfter) {
    var C = COLS[col], pts = [];
    t.en.forEach(function (e, j) {
      var n = need(t, col, e, j);
      if (n) pts.push({ key: e[0], b: n.b, v: n.v, after: fixAfter[e[0]] });
    });
    if (!pts.length) return "";
    var bw = pts.length > 40 ? 6 : pts.length > 20 ? 10 : pts.length > 6 ? 16 : 26, gap = 3, left = 48, top = 20, ph = 130;
    var w = Math.max(230, left + pts.length * (bw + gap) + 16), hgt = top + ph + 48;
    var ymax = Math.max(C.limit || 0, 1);
    pts.forEach(function (p) { if (p.b) ymax = Math.max(ymax, p.b); });
    ymax *= 1.08;
    var y = function (b) { return top + ph - ph * b / ymax; };
    var s = ["<svg width=\"" + w + "\" height=\"" + hgt + "\" role=\"img\" aria-label=\"bytes per batch size on " + esc(C.label) + "\">"];
    [0, 0.5, 1].forEach(function (f) {
      var b = ymax / 1.08 * f, yy = y(b).toFixed(1);
      s.push("<line x1=\"" + (left - 3) + "\" x2=\"" + (w - 8) + "\" y1=\"" + yy + "\" y2=\"" + yy + "\" stroke=\"#eee\" />");
      s.push("<text x=\"" + (left - 5) + "\" y=\"" + yy + "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + (b ? kib(b) : "0") + "</text>");
    });
    var every = Math.ceil(pts.length / 14);
    pts.forEach(function (p, i) {
      var x = left + i * (bw + gap), fill = p.v === "o" ? "var(--over)" : p.v === "f" ? "var(--fit)" : p.v === "u" ? "var(--unc)" : "var(--na)";
      if (p.b !== null) {
        s.push("<rect class=\"bar " + p.v + "\" x=\"" + x + "\" y=\"" + y(p.b).toFixed(1) + "\" width=\"" + bw + "\" height=\"" + (ph - (y(p.b) - top)).toFixed(1) +
          "\" fill=\"" + fill + "\"><title>batch " + esc(p.key) + ": " + p.b + " B (" + verdictWord(p.v) + "; limit " + C.limit + " B)</title></rect>");
      }
      if (p.after !== undefined && p.after !== null) {
        s.push("<rect class=\"after\" x=\"" + (x - 1) + "\" y=\"" + y(p.after).toFixed(1) + "\" width=\"" + (bw + 2) + "\" height=\"" + (ph - (y(p.after) - top)).toFixed(1) +
          "\" fill=\"none\" stroke=\"#111\" stroke-dasharray=\"2 1\"><title>after the fix: " + p.after + " B</title></rect>");
      }
      if (i % every === 0) {
        s.push("<text x=\"" + (x + bw / 2) + "\" y=\"" + (top + ph + 6) + "\" text-anchor=\"end\" transform=\"rotate(-60 " + (x + bw / 2) + " " + (top + ph + 6) + ")\">" + esc(p.key) + "</text>");
      }
    });
    if (C.limit) {
      var ly = y(C.limit).toFixed(1);
      s.push("<line class=\"limit\" x1=\"" + left + "\" x2=\"" + (w - 8) + "\" y1=\"" + ly + "\" y2=\"" + ly + "\" stroke=\"var(--over)\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\" />");
      s.push("<text x=\"" + left + "\" y=\"" + (Number(ly) - 4) + "\" fill=\"var(--over)\">limit " + C.limit + " B</text>");
    }
    s.push("</svg>");
    return "<div class=\"chart\" data-col=\"" + col + "\"><div class=\"title\">" + esc(C.label) + " <span class=\"muted\">" + esc(C.arch) + "</span></div>" + s.join("") + "</div>";
  }
  function renderTable(i) {
    var t = TABLES[i];
    if (!t) { main.innerHTML = "<p class=\"empty\">No such table.</p>"; return; }
    setNav("table", t.full.split("/").pop());
    var h = [], own = ownCol(t);
    var cols = (own !== null ? [own] : []).concat(targetCols().map(function (c) { return c.id; }).filter(function (c) { return c !== own && t.cells[c]; }));
    h.push("<p><a href=\"#matrix\">\u2190 matrix</a></p><h2 id=\"table-title\">" + esc(t.full) + "</h2>");
    var facts = [];
    if (t.e) facts.push("engine <b>" + esc(t.e) + "</b>");
    facts.push((D.kind === "doctor" ? "kernel" : "family") + " <b>" + esc(t.k) + "</b>");
    facts.push("dtype <b>" + esc(t.d || "bf16") + "</b>");
    if (t.s) facts.push("<code>" + esc(t.s) + "</code>");
    if (t.dev) facts.push((D.kind === "doctor" ? "" : "named device ") + "<b>" + esc(t.dev) + "</b>");
    h.push("<p>" + facts.join(" \u00b7 ") + "</p>");
    if (t.why) h.push("<p class=\"muted\">Not checked for shared memory: " + esc(t.why) + ".</p>");
    if (t.n && t.n.length) {
      h.push("<h3>Other diagnostics</h3><ul>" + t.n.map(function (n) {
        var keys = n[2] === "*" ? "every entry" : n[2].slice(0, 12).join(", ") + (n[2].length > 12 ? ", \u2026" : "");
        return "<li><code>" + esc(n[0]) + "</code> " + esc(n[1]) + (n[2].length ? " <span class=\"muted\">(" + esc(keys) + ")</span>" : "") + "</li>";
      }).join("") + "</ul>");
    }
    if (D.extra && D.extra.tables && D.extra.tables[i]) {
      h.push("<ul>" + D.extra.tables[i].map(function (l) { return "<li>" + esc(l) + "</li>"; }).join("") + "</ul>");
    }
    if (cols.length && t.en.length) {
      h.push("<h3>Verdicts</h3><table class=\"data\" id=\"verdicts\"><tbody><tr>");
      cols.forEach(function (c) { h.push("<th>" + esc(COLS[c].label) + (c === own && D.kind === "check" ? " <span class=\"pill\">own device</span>" : "") + "<br /><span class=\"muted\">" + esc(COLS[c].arch) + "</span></th>"); });
      h.push("</tr><tr>");
      cols.forEach(function (c) { h.push(cellHtml(t, c, true)); });
      h.push("</tr></tbody></table>");
      h.push("<h3>Shared memory per " + (D.kind === "doctor" ? "batch-size range" : "batch size") + "</h3><div class=\"charts\" id=\"charts\">");
      cols.forEach(function (c) {
        var after = {};
        if (t.fx) {
          Object.keys(t.fx).forEach(function (k) {
            var f = FIXES[t.fx[k]], n = f.applied ? null : needOf(t.g, c, f.new);
            if (n) after[k] = n.b;
          });
        }
        h.push(chart(t, c, after));
      });
      h.push("</div><p class=\"note\">Bars: bytes the entry's kernel needs per block (worst kernel variant); dashed line: the class's per-block limit; dotted outline: after the fix.</p>");
      h.push("<h3>Entries</h3><table class=\"data\" id=\"entries\"><thead><tr><th class=\"num\">" + (D.kind === "doctor" ? "batch sizes" : "batch") + "</th><th>config</th>");
      cols.forEach(function (c) { h.push("<th class=\"num\">" + esc(COLS[c].label) + "<br /><span class=\"muted\">" + kib(COLS[c].limit || 0) + "</span></th>"); });
      h.push("<th>fix</th></tr></thead><tbody>");
      t.en.forEach(function (e, j) {
        var r = "<tr><td class=\"num\">" + esc(e[0]) + "</td><td class=\"cfg\">" + esc(cfgText(CONFIGS[e[1]])) + "</td>";
        cols.forEach(function (c) {
          var n = need(t, c, e, j);
          if (!n) { r += "<td></td>"; return; }
          var st = n.v === "o" ? " style=\"color:var(--over);font-weight:600\"" : "";
          r += "<td class=\"num\"" + st + " title=\"" + esc(verdictWord(n.v)) + "\">" + (n.b == null ? verdictWord(n.v) : bytes(n.b)) + "</td>";
        });
        var fx = t.fx && t.fx[e[0]] !== undefined ? FIXES[t.fx[e[0]]] : null;
        r += "<td class=\"cfg\">" + (fx ? (fx.applied ? "fixed, was " + esc(cfgText(CONFIGS[fx.old])) : "\u2192 " + esc(cfgText(CONFIGS[fx.new]))) : t.why_no_fix[e[0]] ? "<span class=\"muted\">no fix: " + esc(t.why_no_fix[e[0]]) + "</span>" : "") + "</td></tr>";
        h.push(r);
      });
      h.push("</tbody></table>");
    }
    if (t.fx) {
      h.push("<h3>Fixes</h3><p class=\"note\">The fixer's choice for each offending entry: the fastest config (performance model) that fits every device class of this table. " +
        "Predicted speed against the original on the file's own device (where the original runs), and against the naive fix (lower num_stages, then halve the largest block) where the original does not fit.</p>");
      h.push("<table class=\"data\" id=\"fixes\"><thead><tr><th class=\"num\">batch</th><th>old</th><th>new</th><th>naive fix</th><th>change</th><th>bytes before \u2192 after / limit</th><th>vs old on own device</th><th>vs naive fix</th></tr></thead><tbody>");
      Object.keys(t.fx).forEach(function (k) {
        var f = FIXES[t.fx[k]];
        var ch = Object.keys(f.ch).map(function (p) { return p + "=" + f.ch[p] + (f.why && f.why[p] ? " (" + f.why[p] + ")" : ""); }).join(", ") +
          (f.src ? "; from " + (f.src === "engine default" ? "the engine's own default" : f.src) : "");
        // one line per distinct (before, after, limit); classes with equal figures share it
        var lines = [], byFig = {};
        cols.forEach(function (c) {
          var a = needOf(t.g, c, f.old), b = needOf(t.g, c, f.new), C = COLS[c];
          if (!a && !b) return;
          var fig = (a && a.b != null ? a.b : "?") + " \u2192 " + (b && b.b != null ? b.b : "?") + " / " + (C.limit == null ? "?" : C.limit);
          if (!byFig[fig]) { byFig[fig] = { archs: [], over: false }; lines.push(fig); }
          byFig[fig].archs.push(C.arch);
          byFig[fig].over = byFig[fig].over || (b && b.v === "o");
        });
        var nd = lines.map(function (fig) {
          return "<span" + (byFig[fig].over ? " style=\"color:var(--over)\"" : "") + ">" + esc(byFig[fig].archs.join("/")) + ": " + fig + "</span>";
        }).join("<br />");
        var vn = Object.keys(f.vsNaive).map(function (d) { return esc(d) + ": " + ratioHtml(f.vsNaive[d]); }).join("<br />") || "\u2013";
        h.push("<tr><td class=\"num\">" + esc(k) + "</td><td class=\"cfg\">" + esc(cfgText(CONFIGS[f.old])) + "</td><td class=\"cfg\">" + esc(cfgText(CONFIGS[f.new])) +
          "</td><td class=\"cfg\">" + (f.naive === null ? "\u2013" : esc(cfgText(CONFIGS[f.naive]))) + "</td><td>" + esc(ch) + " <span class=\"pill " + f.safety + "\">" + f.safety + "</span>" +
          (f.applied ? " <span class=\"pill\">applied</span>" : "") + (f.unsafe !== undefined ? "<br /><span class=\"note\">faster with --unsafe-fixes: " + esc(cfgText(CONFIGS[f.unsafe])) + "</span>" : "") +
          "</td><td>" + nd + "</td><td>" + (f.dev ? esc(f.dev) + ": " : "") + ratioHtml(f.vsOld) + "</td><td>" + vn + "</td></tr>");
      });
      h.push("</tbody></table>");
    }
    main.innerHTML = h.join("");
    window.scrollTo(0, 0);
  }

  // ---------------------------------------------------------------- routing
  function route() {
    var h = location.hash || "#summary";
    var m = /^#t(\d+)$/.exec(h);
    if (m) { renderTable(Number(m[1])); return; }
    if (h.indexOf("#matrix") === 0) { renderMatrix(h.indexOf("?") >= 0 ? h.slice(h.indexOf("?") + 1) : ""); return; }
    renderSummary();
  }
  window.addEventListener("hashchange", route);
  route();
  document.body.setAttribute("data-ready", "1");
})();
