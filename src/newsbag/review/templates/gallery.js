"use strict";
// The review gallery: sortable leaderboards, strip plots of the layout score, a sortable paged
// page list beside a page view with the scan under one SVG overlay per source and fused variant.
// Per-page boxes load on demand from pages/<page_id>/data.js, the evaluation (when `newsbag
// evaluate` has run) from evaluation.js: <script> tags, which work from file:// where fetch() does not.
(function () {
  const data = JSON.parse(document.getElementById("gallery-data").textContent);
  const F = {};
  data.fields.forEach((name, i) => { F[name] = i; });
  const ROWS_PER_VIEW = 100;
  const SVG = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);

  // ---- sortable tables (leaderboards) ----
  function cellValue(td) {
    const v = td.dataset.v;
    const n = parseFloat(v);
    return v !== "" && !isNaN(n) && isFinite(v) ? n : v;
  }
  const blank = (v) => v === "" || v === null || v === undefined;
  // Blank cells (not fused, not scored) sort last in both directions: a high-first sort must
  // not open on thousands of them.
  function compare(a, b, dir) {
    if (blank(a) || blank(b)) return blank(a) ? (blank(b) ? 0 : 1) : -1;
    const c = typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b));
    return dir === "asc" ? c : -c;
  }
  document.querySelectorAll("table.sortable").forEach((table) => {
    table.querySelectorAll("th").forEach((th) => th.addEventListener("click", () => {
      const col = parseInt(th.dataset.col, 10);
      const dir = th.dataset.dir === "asc" ? "desc" : "asc";
      table.querySelectorAll("th").forEach((h) => { delete h.dataset.dir; });
      th.dataset.dir = dir;
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      rows.sort((r1, r2) => compare(cellValue(r1.cells[col]), cellValue(r2.cells[col]), dir));
      rows.forEach((r) => body.appendChild(r));
    }));
  });

  function pagePath(pageId, file) {
    return `${data.pages_dir}/${encodeURIComponent(pageId)}/${file}`;
  }
  const rowOf = (pageId) => data.rows.find((r) => r[F.page_id] === pageId);

  // ---- page list ----
  const list = $("page-list");
  const filter = $("filter");
  const onlyFailures = $("only-failures");
  const shown = $("shown");
  let sortKey = "rank", sortDir = "asc", offset = 0, visible = data.rows, current = null;

  function fmt(v) {
    if (v === null || v === undefined) return "";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(3);
    return String(v);
  }
  function refresh() {
    const needle = filter.value.trim().toLowerCase();
    visible = data.rows.filter((r) => {
      if (onlyFailures.checked && !r[F.failed_sources]) return false;
      if (!needle) return true;
      return [r[F.page_id], r[F.reasons], r[F.failed_sources], r[F.path]].join(" ").toLowerCase().includes(needle);
    });
    const i = F[sortKey];
    visible = visible.slice().sort((a, b) => compare(a[i], b[i], sortDir) || a[F.rank] - b[F.rank]);
    offset = Math.max(0, Math.min(offset, Math.max(0, visible.length - 1)));
    offset -= offset % ROWS_PER_VIEW;
    draw();
  }
  function draw() {
    const body = list.tBodies[0];
    const frag = document.createDocumentFragment();
    visible.slice(offset, offset + ROWS_PER_VIEW).forEach((r) => {
      const tr = document.createElement("tr");
      tr.dataset.page = r[F.page_id];
      const cells = [[r[F.rank], ""], [r[F.page_id], "page"], ...data.columns.map((c) => [r[F[c.key]], c.extra ? "extra" : ""]),
                     [r[F.failed_sources], "extra bad"]];
      cells.forEach(([v, cls]) => {
        const td = document.createElement("td");
        td.textContent = fmt(v);
        if (cls) td.className = cls;
        tr.appendChild(td);
      });
      // The page cell: thumbnail, id, and why the page is worth a look (the list's widest text,
      // kept under the id so the numbers stay in view on a narrow list).
      const thumb = document.createElement("img");
      thumb.className = "thumb";
      thumb.loading = "lazy";
      thumb.alt = "";
      thumb.src = pagePath(r[F.page_id], data.thumb);
      const why = document.createElement("div");
      why.className = "why";
      why.textContent = r[F.reasons];
      tr.cells[1].prepend(thumb);
      tr.cells[1].append(why);
      if (r[F.page_id] === current) tr.classList.add("open");
      tr.addEventListener("click", () => openPage(r[F.page_id]));
      frag.appendChild(tr);
    });
    body.replaceChildren(frag);
    const end = Math.min(visible.length, offset + ROWS_PER_VIEW);
    shown.textContent = visible.length ? `${offset + 1}–${end} of ${visible.length} pages` : `0 of ${data.rows.length} pages`;
    $("prev-rows").disabled = offset === 0;
    $("next-rows").disabled = end >= visible.length;
    list.querySelectorAll("th").forEach((th) => {
      if (th.dataset.key === sortKey) th.dataset.dir = sortDir; else delete th.dataset.dir;
    });
  }
  list.querySelectorAll("th").forEach((th) => th.addEventListener("click", () => {
    const key = th.dataset.key;
    // Scores and disagreement read best high-first; coverage and ids low-first.
    const lowFirst = ["rank", "page_id", "line_coverage", "failed_sources", "reasons"].includes(key);
    sortDir = key === sortKey ? (sortDir === "asc" ? "desc" : "asc") : (lowFirst ? "asc" : "desc");
    sortKey = key;
    offset = 0;
    refresh();
  }));
  $("more-columns").addEventListener("change", (ev) => list.classList.toggle("more", ev.target.checked));
  filter.addEventListener("input", () => { offset = 0; refresh(); });
  onlyFailures.addEventListener("change", () => { offset = 0; refresh(); });
  $("prev-rows").addEventListener("click", () => { offset = Math.max(0, offset - ROWS_PER_VIEW); draw(); });
  $("next-rows").addEventListener("click", () => {
    if (offset + ROWS_PER_VIEW < visible.length) offset += ROWS_PER_VIEW;
    draw();
  });

  // ---- page view ----
  const viewer = $("viewer");
  const stage = $("stage");
  const scan = $("scan");
  const tip = $("tip");
  const layersBox = $("layers");
  const cache = {};
  const hidden = new Set();   // layer names the reviewer switched off
  const shownByUser = new Set();  // layer names the reviewer switched on
  let pinned = false;
  let evaluation = null;   // what evaluation.js holds, once it has loaded

  window.newsbagPage = function (page) {
    cache[page.page_id] = page;
    if (current === page.page_id) render(page);
  };
  // The list moves to the rows holding the page open (j/k and links reach past the rows in view).
  function follow(pageId) {
    const k = visible.findIndex((r) => r[F.page_id] === pageId);
    if (k < 0 || (k >= offset && k < offset + ROWS_PER_VIEW)) return;
    offset = k - k % ROWS_PER_VIEW;
    draw();
  }
  // Side by side (wide screens) the page opens beside the list and the window stays put;
  // stacked (phones) it scrolls to the page view.
  const sideBySide = window.matchMedia("(min-width: 1000px)");
  function openPage(pageId) {
    current = pageId;
    follow(pageId);
    list.querySelectorAll("tbody tr").forEach((tr) => tr.classList.toggle("open", tr.dataset.page === pageId));
    viewer.hidden = false;
    viewer.dataset.page = "";
    $("viewer-title").textContent = pageId;
    pageInfo(pageId);
    if (location.hash !== "#page=" + encodeURIComponent(pageId)) {
      history.replaceState(null, "", "#page=" + encodeURIComponent(pageId));
    }
    if (cache[pageId]) { render(cache[pageId]); return; }
    const s = document.createElement("script");
    s.src = pagePath(pageId, "data.js");
    s.onerror = () => {
      viewer.dataset.page = "error";
      const failed = Array.from(document.querySelectorAll("tr.failed-page")).find((tr) => tr.dataset.page === pageId);
      $("viewer-title").textContent = pageId + (failed ? ": review failed: " + failed.cells[1].textContent
                                                        : ": no page data (not reviewed yet or out of date: rerun newsbag review)");
    };
    s.onload = () => s.remove();
    document.head.appendChild(s);
    if (!sideBySide.matches) viewer.scrollIntoView({block: "start"});
  }
  function defaultOn(layer, page) {
    if (hidden.has(layer.name)) return false;
    if (shownByUser.has(layer.name)) return true;
    // The recommended fused layer, else (it failed on this page, or is not made yet) the first one with boxes.
    if (layer.kind === "gt") return true;
    const fused = page.layers.filter((l) => l.kind === "fused" && !l.failed && !l.pending);
    const ref = fused.find((l) => l.recommended) || fused[0];
    return ref ? layer.name === ref.name : layer === page.layers[0];
  }
  function render(page) {
    stage.querySelectorAll("svg.layer").forEach((s) => s.remove());
    layersBox.replaceChildren();
    scan.src = pagePath(page.page_id, page.scan);
    scan.alt = "scan of " + page.page_id;
    stage.style.aspectRatio = `${page.width} / ${page.height}`;
    const fontSize = Math.max(page.width, page.height) / 70;
    const gt = evaluation && evaluation.gt[page.page_id];
    page.layersShown = gt ? [...page.layers, gtLayer(gt)] : page.layers;
    page.layersShown.forEach((layer) => {
      const svg = document.createElementNS(SVG, "svg");
      svg.setAttribute("class", `layer ${layer.kind}`);
      svg.setAttribute("viewBox", `0 0 ${layer.width || page.width} ${layer.height || page.height}`);
      svg.setAttribute("preserveAspectRatio", "none");
      svg.dataset.layer = layer.name;
      layer.boxes.forEach((b, i) => {
        const [x0, y0, x1, y1, code] = b;
        const coarse = layer.kind === "gt" ? b[10] : page.coarse[code];
        const rect = document.createElementNS(SVG, "rect");
        rect.setAttribute("x", x0); rect.setAttribute("y", y0);
        rect.setAttribute("width", Math.max(0, x1 - x0)); rect.setAttribute("height", Math.max(0, y1 - y0));
        rect.setAttribute("class", "box c-" + coarse);
        rect.setAttribute("stroke", data.colors[coarse] || "#888");
        rect.setAttribute("fill", data.colors[coarse] || "#888");
        rect.dataset.i = i;
        svg.appendChild(rect);
        if (layer.kind === "fused" && b[6] !== null && b[6] !== undefined) {
          const t = document.createElementNS(SVG, "text");
          t.setAttribute("x", x0 + fontSize * 0.25); t.setAttribute("y", y0 + fontSize);
          t.setAttribute("font-size", fontSize);
          t.setAttribute("class", "ro");
          t.textContent = String(b[6] + 1);
          svg.appendChild(t);
        }
      });
      const on = defaultOn(layer, page);
      svg.style.display = on ? "" : "none";
      stage.appendChild(svg);
      const label = document.createElement("label");
      label.className = `toggle ${layer.kind}` + (layer.failed || layer.pending ? " bad" : "");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.checked = on;
      box.dataset.layer = layer.name;
      box.addEventListener("change", () => {
        svg.style.display = box.checked ? "" : "none";
        (box.checked ? hidden : shownByUser).delete(layer.name);
        (box.checked ? shownByUser : hidden).add(layer.name);
      });
      label.appendChild(box);
      const n = layer.boxes.length;
      label.append(` ${layer.name}${layer.recommended ? " ★" : ""} (${layer.failed ? "FAILED" : layer.pending ? "not fused yet" : n})`);
      if (layer.kind === "gt") label.id = "gt-toggle";
      layersBox.appendChild(label);
    });
    stage.classList.toggle("no-order", !$("show-order").checked);
    hideTip();
    viewer.dataset.renderedAt = String(performance.now());
    viewer.dataset.page = page.page_id;
  }
  function describe(page, layerName, i) {
    const layer = page.layersShown.find((l) => l.name === layerName);
    const b = layer.boxes[i];
    const [x0, y0, x1, y1, code, score, order, raw, support, members] = b;
    const lines = [
      ["layer", layerName],
      ["label", layer.kind === "gt" ? raw : page.labels[code] + (raw && raw !== page.labels[code] ? ` (${raw})` : "")],
      ["score", score === null ? "none" : score.toFixed(3)],
      ["box", `${x0},${y0} – ${x1},${y1}`],
    ];
    if (order !== null && order !== undefined) lines.push(["order", String(order + 1)]);
    if (support && support.length) lines.push(["support", support.join(", ")]);
    if (members && members.length) lines.push(["members", members.join("\n")]);
    return lines;
  }
  function showTip(ev, rect) {
    const page = cache[current];
    if (!page) return;
    const svg = rect.ownerSVGElement;
    const lines = describe(page, svg.dataset.layer, parseInt(rect.dataset.i, 10));
    tip.replaceChildren();
    lines.forEach(([k, v]) => {
      const row = document.createElement("div");
      row.className = "tip-" + k;
      const key = document.createElement("span");
      key.className = "k";
      key.textContent = k;
      const val = document.createElement("span");
      val.className = "v";
      val.textContent = v;
      row.append(key, val);
      tip.appendChild(row);
    });
    tip.hidden = false;
    const pad = 14;
    let x = ev.clientX + pad, y = ev.clientY + pad;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth) x = Math.max(0, ev.clientX - w - pad);
    if (y + h > window.innerHeight) y = Math.max(0, ev.clientY - h - pad);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
    stage.querySelectorAll("rect.hover").forEach((r) => r.classList.remove("hover"));
    rect.classList.add("hover");
  }
  function hideTip() {
    tip.hidden = true;
    pinned = false;
    stage.querySelectorAll("rect.hover").forEach((r) => r.classList.remove("hover"));
  }
  stage.addEventListener("mouseover", (ev) => {
    if (!pinned && ev.target instanceof SVGRectElement) showTip(ev, ev.target);
  });
  stage.addEventListener("mouseout", (ev) => {
    if (!pinned && ev.target instanceof SVGRectElement) hideTip();
  });
  // A tap (or click) pins the box's details until the next tap elsewhere.
  stage.addEventListener("click", (ev) => {
    if (ev.target instanceof SVGRectElement) { pinned = false; showTip(ev, ev.target); pinned = true; } else hideTip();
  });
  $("show-order").addEventListener("change", (ev) => stage.classList.toggle("no-order", !ev.target.checked));
  $("zoom").addEventListener("input", (ev) => { stage.style.width = (parseFloat(ev.target.value) * 100) + "%"; });
  $("viewer-close").addEventListener("click", () => {
    viewer.hidden = true; current = null; hideTip();
    history.replaceState(null, "", location.pathname + location.search);
  });
  function step(delta) {
    if (!current) return;
    const k = visible.findIndex((r) => r[F.page_id] === current);
    const next = visible[k + delta];
    if (next) openPage(next[F.page_id]);
  }
  $("page-prev").addEventListener("click", () => step(-1));
  $("page-next").addEventListener("click", () => step(1));
  document.addEventListener("keydown", (ev) => {
    if (viewer.hidden || ev.target instanceof HTMLInputElement) return;
    if (ev.key === "Escape") $("viewer-close").click();
    if (ev.key === "j") step(1);
    if (ev.key === "k") step(-1);
  });


  // ---- plots (inline SVG, no library) ----
  function el(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    Object.entries(attrs || {}).forEach(([k, v]) => e.setAttribute(k, v));
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function title(e, text) { e.appendChild(el("title", {}, text)); return e; }
  const PLOT_W = 520, LABEL_W = 200, ROW_H = 17;
  const px = (v) => LABEL_W + 10 + v * (PLOT_W - LABEL_W - 20);
  // One row per variant and source: a dot per page's layout score (x 0..1), the median as a
  // tick; `here` (a page id) is drawn as a large red dot. `notes` adds text after a name.
  function stripPlot(box, here, notes) {
    const names = data.strip;
    const rows = data.rows.filter((r) => r[F.layout]);
    if (!names.length || !rows.length) { box.replaceChildren(); return false; }
    const height = ROW_H * names.length + 24;
    const svg = el("svg", {viewBox: `0 0 ${PLOT_W} ${height}`, role: "img", "aria-label": "layout score per variant and source"});
    [0, 0.5, 1].forEach((v) => {
      svg.appendChild(el("line", {x1: px(v), x2: px(v), y1: 0, y2: height - 18, class: "axis"}));
      svg.appendChild(el("text", {x: px(v), y: height - 4, "text-anchor": "middle"}, String(v)));
    });
    names.forEach((n, k) => {
      const y = ROW_H * k + ROW_H / 2 + 2;
      const label = el("text", {x: LABEL_W, y: y + 4, "text-anchor": "end", class: n.name === data.recommended ? "rec" : ""},
                       `${n.name}${n.name === data.recommended ? " ★" : ""}${notes ? notes(k) : ""}`);
      svg.appendChild(label);
      const values = [];
      rows.forEach((r) => {
        const v = r[F.layout][k];
        if (v === null || v === undefined) return;
        values.push(v);
        if (r[F.page_id] !== here) svg.appendChild(title(el("circle", {cx: px(v), cy: y, r: 3, class: `dot ${n.kind}`}), `${r[F.page_id]}: ${v.toFixed(3)}`));
      });
      if (values.length) {
        values.sort((a, b) => a - b);
        const m = values[Math.floor(values.length / 2)];
        svg.appendChild(el("line", {x1: px(m), x2: px(m), y1: y - 7, y2: y + 7, class: "median"}));
      }
      const mine = here && rowOf(here);
      const v = mine && mine[F.layout] ? mine[F.layout][k] : null;
      if (v !== null && v !== undefined) svg.appendChild(title(el("circle", {cx: px(v), cy: y, r: 5.5, class: "dot here"}), `this page: ${v.toFixed(3)}`));
    });
    box.replaceChildren(svg);
    return true;
  }
  // How many pages each variant is the best variant on (the mean hides this).
  function bestCounts() {
    const counts = data.strip.map(() => 0);
    data.rows.forEach((r) => {
      const l = r[F.layout];
      if (!l) return;
      let best = -1;
      data.strip.forEach((n, k) => {
        if (n.kind === "variant" && l[k] !== null && (best < 0 || l[k] > l[best])) best = k;
      });
      if (best >= 0) counts[best] += 1;
    });
    return (k) => data.strip[k].kind === "variant" ? ` · best on ${counts[k]}` : "";
  }
  if (stripPlot($("strip-all"), null, bestCounts())) $("strip-all-panel").hidden = false;

  // ---- the page's scores, why look, transcript ----
  function pageInfo(pageId) {
    const r = rowOf(pageId);
    $("page-why").textContent = r ? r[F.reasons] : "";
    const scores = $("page-scores");
    scores.replaceChildren();
    const add = (k, v) => {
      const d = document.createElement("div");
      const dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = k; dd.textContent = v;
      d.append(dt, dd);
      scores.appendChild(d);
    };
    if (r) data.columns.forEach((c) => { if (!c.extra && r[F[c.key]] !== null && r[F[c.key]] !== undefined) add(c.label, fmt(r[F[c.key]])); });
    const measured = evaluation && evaluation.pages[pageId];
    if (measured) {
      const ref = data.reference;
      if (ref && measured[ref] !== undefined && measured[ref] !== null) add(`${ref} ${evaluation.measure} (GT)`, fmt(measured[ref]));
      const best = Object.entries(measured).filter(([, v]) => v !== null).sort((a, b) => b[1] - a[1])[0];
      if (best) add(`best ${evaluation.measure} (GT)`, `${best[0]} ${fmt(best[1])}`);
    }
    stripPlot($("strip-page"), pageId);
    const board = $("viewer-board");
    board.hidden = !(r && r[F.board]);
    if (r && r[F.board]) board.href = `${data.top_dir}/${encodeURIComponent(r[F.board])}`;
    const variants = r ? r[F.transcripts] || [] : [];
    const box = $("transcript");
    box.hidden = !variants.length;
    const links = $("transcript-links");
    links.replaceChildren();
    const frame = $("transcript-frame");
    frame.removeAttribute("src");
    variants.forEach((v, k) => {
      const href = `${data.transcripts_dir}/${v.split("/").map(encodeURIComponent).join("/")}/${encodeURIComponent(pageId)}.txt`;
      const a = document.createElement("a");
      a.href = href; a.target = "transcript-frame"; a.textContent = `fusion/${v}`;
      links.appendChild(a);
      if (k === 0) frame.dataset.src = href;
    });
  }
  // The transcript's frame loads when opened, not with every page.
  $("transcript").addEventListener("toggle", (ev) => {
    const frame = $("transcript-frame");
    if (ev.target.open && !frame.getAttribute("src") && frame.dataset.src) frame.src = frame.dataset.src;
  });
  $("transcript-frame").name = "transcript-frame";

  // ---- evaluation (evaluation.js, written by `newsbag evaluate` and `newsbag review`) ----
  const GT_COARSE = {text: "text", graphic: "image", image: "image", table: "table", title: "title"};
  function gtLayer(gt) {
    return {name: "ground truth", kind: "gt", failed: false, pending: false, recommended: false,
            width: gt.width, height: gt.height,
            boxes: gt.regions.map(([x0, y0, x1, y1, cls, label]) => [x0, y0, x1, y1, -1, null, null, label, [], [], GT_COARSE[cls] || "other"])};
  }
  function ranks(values) {
    const order = values.map((v, i) => [v, i]).sort((a, b) => a[0] - b[0]);
    const out = new Array(values.length);
    for (let i = 0; i < order.length;) {
      let j = i;
      while (j + 1 < order.length && order[j + 1][0] === order[i][0]) j += 1;
      for (let k = i; k <= j; k += 1) out[order[k][1]] = (i + j) / 2;
      i = j + 1;
    }
    return out;
  }
  function spearman(xs, ys) {
    const rx = ranks(xs), ry = ranks(ys);
    const mean = (a) => a.reduce((s, v) => s + v, 0) / a.length;
    const mx = mean(rx), my = mean(ry);
    let sxy = 0, sxx = 0, syy = 0;
    rx.forEach((x, i) => { sxy += (x - mx) * (ry[i] - my); sxx += (x - mx) ** 2; syy += (ry[i] - my) ** 2; });
    return sxx && syy ? sxy / Math.sqrt(sxx * syy) : null;
  }
  function evaluationTable(ev) {
    const by = {};
    Object.entries(ev.pages).forEach(([pageId, measured]) => Object.entries(measured).forEach(([name, v]) => {
      if (v === null) return;
      const s = ev.scores[pageId] && ev.scores[pageId][name];
      const e = by[name] || (by[name] = {gt: [], score: []});
      e.gt.push(v);
      if (s !== undefined) e.score.push(s);
    }));
    const mean = (a) => a.length ? a.reduce((s, v) => s + v, 0) / a.length : null;
    const rows = Object.entries(by).map(([name, e]) => [name, ev.kinds[name] || "", mean(e.gt), mean(e.score), e.gt.length])
      .sort((a, b) => b[2] - a[2] || a[0].localeCompare(b[0]));
    const table = $("evaluation-table");
    const head = document.createElement("tr");
    ["rank", "name", "kind", `${ev.measure} (GT, higher is better)`, "score (no GT)", "pages"].forEach((t) => {
      const th = document.createElement("th"); th.textContent = t; head.appendChild(th);
    });
    table.tHead.replaceChildren(head);
    const body = document.createDocumentFragment();
    rows.forEach((row, k) => {
      const tr = document.createElement("tr");
      if (k === 0) tr.className = "best";
      [k + 1, row[0] + (k === 0 ? " ★ best" : "") + (row[0] === data.recommended ? " (recommended)" : ""), ...row.slice(1)]
        .forEach((v) => { const td = document.createElement("td"); td.textContent = fmt(v); tr.appendChild(td); });
      tr.dataset.name = row[0];
      body.appendChild(tr);
    });
    table.tBodies[0].replaceChildren(body);
  }
  function evaluationPlot(ev) {
    const pts = [];
    Object.entries(ev.pages).forEach(([pageId, measured]) => Object.entries(measured).forEach(([name, v]) => {
      const s = ev.scores[pageId] && ev.scores[pageId][name];
      if (v !== null && s !== undefined && s !== null) pts.push({pageId, name, x: s, y: v, kind: ev.kinds[name]});
    }));
    const W = 420, H = 300, L = 44, B = 36, T = 8, R = 8;
    const sx = (v) => L + v * (W - L - R), sy = (v) => H - B - v * (H - B - T);
    const svg = el("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `layout score (no GT) against ${ev.measure} (GT)`});
    [0, 0.5, 1].forEach((v) => {
      svg.appendChild(el("line", {x1: sx(v), x2: sx(v), y1: T, y2: H - B, class: "axis"}));
      svg.appendChild(el("line", {x1: L, x2: W - R, y1: sy(v), y2: sy(v), class: "axis"}));
      svg.appendChild(el("text", {x: sx(v), y: H - B + 14, "text-anchor": "middle"}, String(v)));
      svg.appendChild(el("text", {x: L - 6, y: sy(v) + 4, "text-anchor": "end"}, String(v)));
    });
    svg.appendChild(el("text", {x: (L + W) / 2, y: H - 4, "text-anchor": "middle"}, "layout score (no ground truth)"));
    svg.appendChild(el("text", {x: 12, y: (T + H - B) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(T + H - B) / 2})`},
                       `${ev.measure} (ground truth)`));
    pts.forEach((p) => svg.appendChild(title(el("circle", {cx: sx(p.x), cy: sy(p.y), r: 3, class: `dot ${p.kind}`}),
                                             `${p.name} on ${p.pageId}: score ${p.x.toFixed(3)}, ${ev.measure} ${p.y.toFixed(3)}`)));
    $("evaluation-plot").replaceChildren(svg);
    const rho = pts.length > 2 ? spearman(pts.map((p) => p.x), pts.map((p) => p.y)) : null;
    $("evaluation-note").textContent = `${pts.length} (page, variant or source) pairs; blue: fused variants, grey: sources. ` +
      (rho === null ? "" : `Rank correlation of the no-GT score with ${ev.measure}: ${rho.toFixed(2)} (1 = the score orders layouts as the ground truth does).`) + (ev.tuning ? `\n${ev.tuning.line}` : "");
  }
  window.newsbagEvaluation = function (ev) {
    evaluation = ev;
    $("evaluation-measure").textContent = `(${Object.keys(ev.pages).length} pages with ground truth; ${ev.measure}, higher is better)`;
    evaluationTable(ev);
    evaluationPlot(ev);
    $("evaluation").hidden = false;
    const legend = $("legend");
    const li = document.createElement("li");
    li.innerHTML = '<span class="swatch" style="border: 2px dotted #222"></span>';
    li.append("dotted: ground truth (page view)");
    legend.appendChild(li);
    document.body.dataset.evaluation = "1";
    if (current) pageInfo(current);
    if (current && cache[current]) render(cache[current]);
  };

  refresh();
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
  // index.html#page=<page_id> opens that page (a link a reviewer can share), on load and when
  // pasted into a tab already showing the gallery (only the fragment changes: no reload).
  function openFromHash() {
    if (location.hash.startsWith("#page=")) openPage(decodeURIComponent(location.hash.slice(6)));
  }
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
  // The first screen shows a page: the one most worth a look, beside the list.
  if (!current && sideBySide.matches && visible.length) openPage(visible[0][F.page_id]);
})();
