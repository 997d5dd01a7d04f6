"use strict";
// Gallery behaviour: mark loaded images (tests read data-loaded), filter, sort, zoom a board.
(function () {
  const body = document.body;
  const cards = Array.from(document.querySelectorAll(".card"));
  const boards = Array.from(document.querySelectorAll("img.board"));

  function countLoaded() {
    body.dataset.imagesLoaded = String(boards.filter((img) => img.dataset.loaded === "true").length);
  }
  function markImage(img) {
    if (img.complete && img.naturalWidth > 0) {
      img.dataset.loaded = "true";
      img.dataset.naturalWidth = String(img.naturalWidth);
    } else if (img.complete) {
      img.dataset.loaded = "error";
    }
    countLoaded();
  }
  boards.forEach((img) => {
    img.addEventListener("load", () => markImage(img));
    img.addEventListener("error", () => { img.dataset.loaded = "error"; countLoaded(); });
    if (img.complete) markImage(img);
  });

  const filter = document.getElementById("filter");
  const sort = document.getElementById("sort");
  const onlyFailures = document.getElementById("only-failures");
  const shown = document.getElementById("shown");
  const container = document.getElementById("cards");
  const keys = {
    score: (c) => -parseFloat(c.dataset.score),
    src: (c) => -parseFloat(c.dataset.src),
    fused: (c) => -parseFloat(c.dataset.fused),
    cov: (c) => parseFloat(c.dataset.cov),
    page: (c) => c.dataset.page,
  };

  function apply() {
    const needle = filter.value.trim().toLowerCase();
    let visible = 0;
    cards.forEach((c) => {
      const hit = !needle || c.textContent.toLowerCase().includes(needle);
      const fails = !onlyFailures.checked || parseInt(c.dataset.failed, 10) > 0;
      c.hidden = !(hit && fails);
      if (!c.hidden) visible += 1;
    });
    const key = keys[sort.value] || keys.score;
    const sorted = cards.slice().sort((a, b) => {
      const ka = key(a), kb = key(b);
      if (ka < kb) return -1;
      if (ka > kb) return 1;
      return parseInt(a.dataset.rank, 10) - parseInt(b.dataset.rank, 10);
    });
    sorted.forEach((c) => container.appendChild(c));
    shown.textContent = visible + " of " + cards.length + " shown";
  }
  [filter, onlyFailures].forEach((el) => el.addEventListener("input", apply));
  sort.addEventListener("change", apply);
  apply();

  const overlay = document.getElementById("overlay");
  const big = document.getElementById("overlay-img");
  const title = document.getElementById("overlay-title");
  let scale = 0;  // 0 = fit to window, else a factor of the natural size
  function setScale(s) {
    scale = s;
    big.classList.toggle("fit", scale === 0);
    big.style.width = scale === 0 ? "" : Math.round(big.naturalWidth * scale) + "px";
  }
  function open(link) {
    big.src = link.dataset.full;
    title.textContent = link.closest(".card").dataset.page;
    setScale(0);
    overlay.hidden = false;
  }
  function close() { overlay.hidden = true; big.removeAttribute("src"); }
  document.querySelectorAll("a.zoom").forEach((a) => a.addEventListener("click", (ev) => {
    ev.preventDefault();
    open(a);
  }));
  big.addEventListener("click", () => setScale(scale === 0 ? 1 : 0));
  document.getElementById("zoom-in").addEventListener("click", () => setScale((scale || 0.5) * 1.5));
  document.getElementById("zoom-out").addEventListener("click", () => setScale(Math.max(0.1, (scale || 1) / 1.5)));
  document.getElementById("zoom-fit").addEventListener("click", () => setScale(0));
  document.getElementById("overlay-close").addEventListener("click", close);
  document.addEventListener("keydown", (ev) => { if (ev.key === "Escape" && !overlay.hidden) close(); });
  // index.html#zoom=<page_id> opens that page's full board (a link a reviewer can share).
  const wanted = decodeURIComponent(location.hash.replace(/^#zoom=/, ""));
  const card = location.hash.startsWith("#zoom=") && cards.find((c) => c.dataset.page === wanted);
  if (card) open(card.querySelector("a.zoom"));
})();
