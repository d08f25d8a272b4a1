/* The course site's search: a section that teaches a name or whose page title holds the words comes first, a deep
   dive after its lesson; each snippet is the matched section's text (not the theme's), and a hit opens at it.
   Loaded on every page before Sphinx's searchtools.js, which takes this Scorer instead of its own. */
"use strict";

var Scorer = {
  objNameMatch: 11, objPartialMatch: 6, objPrio: {0: 15, 1: 5, 2: -5}, objPrioDefault: 0,
  title: 15, partialTitle: 7, term: 5, partialTerm: 2,
  score: (result) => {
    const [docname, title, , , score] = result;
    const words = (new URLSearchParams(window.location.search).get("q") || "").toLowerCase()
      .split(/[^\p{Letter}\p{Number}_]+/u).filter((w) => w);
    let adjusted = score;
    if (words.length && words.every((w) => title.toLowerCase().includes(w))) adjusted += 3;  // the title says it
    if (docname.startsWith("lessons/deep_dives/")) adjusted -= 1;                            // its lesson first
    return adjusted;
  },
};

document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined") return;
  /* The article, or the section an anchor names, as text: never the theme's buttons or page outline. */
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    doc.querySelectorAll(".headerlink, script, style, article h1, .course-actions, .course-run, .course-source")
      .forEach((el) => el.remove());
    const article = doc.querySelector("article.bd-article") || doc.querySelector('[role="main"]');
    const part = anchor && article ? article.querySelector(anchor) : null;
    return ((part || article || doc.body).textContent || "").replace(/\s+/g, " ");
  };
  /* The snippet around the first match, and the hit's link pointed at the section holding it. */
  Search.makeSearchSummary = (htmlText, keywords, anchor) => {
    const text = Search.htmlToText(htmlText, anchor);
    if (!text) return null;
    const lower = text.toLowerCase();
    const at = [...keywords].map((k) => lower.indexOf(k.toLowerCase())).filter((i) => i > -1)
      .reduce((a, b) => Math.min(a, b), Infinity);
    const start = Number.isFinite(at) ? Math.max(at - 100, 0) : 0;
    const summary = document.createElement("p");
    summary.classList.add("context");
    summary.textContent = (start ? "…" : "") + text.substr(start, 240).trim() + (start + 240 < text.length ? "…" : "");
    if (!anchor && Number.isFinite(at)) {
      const id = sectionOf(htmlText, [...keywords]);
      if (id) queueMicrotask(() => {
        const link = summary.parentElement && summary.parentElement.querySelector("a");
        if (link && !link.hash) link.hash = id;
      });
    }
    return summary;
  };
});

/* The id of the section a hit should open at: the first whose title holds every keyword, else the first whose own
   text (its subsections left out) holds every keyword, else one that holds any. */
function sectionOf(htmlText, keywords) {
  const doc = new DOMParser().parseFromString(htmlText, "text/html");
  const article = doc.querySelector("article.bd-article");
  if (!article) return null;
  const words = keywords.map((k) => k.toLowerCase());
  const sections = Array.from(article.querySelectorAll("section[id]")).map((section) => {
    const own = section.cloneNode(true);
    own.querySelectorAll("section").forEach((s) => s.remove());
    const heading = own.querySelector("h2, h3, h4");   // not the page title: every hit would open at the top
    return {id: section.id, title: heading ? heading.textContent.toLowerCase() : "", text: own.textContent.toLowerCase()};
  });
  const found = sections.find((s) => words.every((w) => s.title.includes(w)))
    || sections.find((s) => words.every((w) => s.text.includes(w)))
    || sections.find((s) => words.some((w) => s.text.includes(w)));
  return found ? "#" + found.id : null;
}
