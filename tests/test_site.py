"""The course website (``make site``, tools/site.py): what the generator derives from the notebooks, then the built
site in a real browser (headless Chromium from Debian's package, driven by Playwright).

The browser half builds the site once per session and serves it with a static file server, as a learner's laptop
or GitHub Pages would. It skips, in one line, where Chromium or the site's packages (``requirements-site.txt``) are
missing: a learner's plain ``make test``. ``.ci/run`` installs both, so CI always runs it.
"""
from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tools import fork, frontend_api, gpu_matrix, reading_time, site
from tools.notebooks import notebook_paths, split_core

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SITE_PACKAGES = ("sphinx", "myst_nb", "sphinx_book_theme", "playwright")
PHONE, DESKTOP = 390, 1280
# Chromium, headless, as root, touching no network of its own
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def png_outputs(cells) -> int:
    return sum("image/png" in o.get("data", {}) for c in cells if c["cell_type"] == "code"
               for o in c.get("outputs", []))


# ------------------------------------------------------------------ the generator, no browser needed
def test_figure_alt_text_says_what_the_code_draws():
    code = ('# Deep dive B: the sweep figure\nN = 32\nfig, ax = plt.subplots()\n'
            'ax.set(xlabel="tokens", ylabel="µs per call", title=f"chain of {N} layers on {DEVICE.name}")\n'
            'H.plot_sweep(df, x="tokens", y="µs", title=f"hidden {HIDDEN}")\n')
    values = site.known_values([{"cell_type": "code", "source": code}], {"gpu": "NVIDIA H200"})
    alt = site.figure_alt(code, values)
    assert alt == ("Figure: chain of 32 layers on NVIDIA H200; hidden …. Plotted: µs per call against tokens. "
                   "(the sweep figure).")
    assert site.figure_alt("# the loss curves\nplt.plot(x, y)\nplt.show()\n", {}) == "Figure: the loss curves."
    assert site.figure_alt("plt.plot(x, y)\n", {}) == "", "nothing to say: empty, and the test below catches it"
    assert generic_alt("") and generic_alt("Figure: plot.") and generic_alt("<Figure size 880x462 with 1 Axes>")
    assert generic_alt(alt) is None


def test_every_stored_figure_gets_alt_text_that_is_neither_empty_nor_generic():
    for path in notebook_paths():
        nb = json.loads(path.read_text())
        for index, cell in enumerate(nb["cells"]):
            if png_outputs([cell]):
                alt = site.figure_alt(site.cell_source(cell), site.known_values(nb["cells"][:index + 1], None))
                assert not generic_alt(alt), f"{path.name} cell {index}: {alt!r}"


GENERIC = re.compile(r"^(figure|image|plot|chart|graph|png|output)?\W*$|^<Figure size", re.I)


def generic_alt(alt: str) -> str | None:
    """Why ``alt`` does not say what a figure shows (None when it does)."""
    words = re.sub(r"^(Figure|One of \d+ figures):", "", alt or "").split()
    if GENERIC.match(alt or "") or len([w for w in words if re.search(r"[A-Za-z]", w)]) < 4:
        return f"empty or generic: {alt!r}"
    return None


def test_the_glossary_defines_every_term_the_pages_link_and_each_pattern_finds_its_term():
    terms = site.glossary_terms()
    assert terms == list(site.TERM_PATTERNS), "site/glossary.md and tools.site.TERM_PATTERNS name the same terms"
    for term in terms:
        assert site.terms_in(f"a sentence about the {term} here", [term]) == [term], term
    assert site.terms_in("graph.check_support(handle)", terms) == ["support check"]
    assert site.terms_in("Statistics", terms) == [], "a pattern matches whole words"


def test_api_names_follow_the_one_list_of_frontend_calls():
    code = ("graph = cudnn.pygraph(handle=h)\no = graph.sdpa_backward(q, k)\ngraphs[0].execute_plan_at_index(p)\n"
            "H.check(o)\ntorch.matmul(a, b)\n")
    assert site.api_names(code) == ["cudnn.pygraph", "sdpa_backward", "execute_plan_at_index"]
    assert set(site.api_names(code)) - {"cudnn.pygraph"} <= set(frontend_api.FRONTEND_METHODS)
    not_the_frontend = ("torch.backends.cudnn.benchmark = True\nseen = set()\nseen.add(x)\ny = (a + b).add(r).relu()\n"
                        "%time g.execute(p)\n")
    assert site.api_names(not_the_frontend) == []


def test_the_agenda_runs_the_cores_in_order_from_their_reading_time():
    books = reading_time.read_all()
    lessons = [site.Lesson(b.name[:2], b.name, f"{b.name[:2]} · x", b.core.minutes, b.deep.minutes) for b in books]
    rows = [r for r in site.agenda(books, lessons).splitlines() if re.match(r"^\| \d\d:\d\d", r)]
    assert rows[0].startswith(f"| {site.clock(0)} ")
    second = round(books[0].core.minutes) + site.EXERCISE_MIN
    assert rows[1].startswith(f"| {site.clock(second)} ")
    assert sum("{doc}" in r for r in rows) == len(books) and "lunch" in "".join(rows)


def test_the_readme_links_the_website_where_make_fork_points_it(tmp_path):
    assert site.site_url() in (ROOT / "README.md").read_text()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "notebooks").mkdir()
    fork.set_repository("Someone/my-fork", tmp_path)
    assert "https://someone.github.io/my-fork/" in (tmp_path / "README.md").read_text()
    assert site.site_url() not in (tmp_path / "README.md").read_text()


# ------------------------------------------------------------------ the built site, in Chromium
@pytest.fixture(scope="session")
def built_site():
    missing = [m for m in SITE_PACKAGES if importlib.util.find_spec(m) is None]
    if missing or CHROMIUM is None:
        pytest.skip("the website's browser tests need Chromium (apt-get install chromium) and requirements-site.txt "
                    f"(make site); missing: {', '.join(missing + ([] if CHROMIUM else ['chromium']))}")
    run = subprocess.run([sys.executable, "-m", "tools.site"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return site.HTML


@pytest.fixture(scope="session")
def server(built_site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(built_site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


@pytest.fixture(scope="session")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def pages(html: Path) -> list[str]:
    """Every page of the site, as a path relative to its root."""
    return sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                  if not p.relative_to(html).parts[0].startswith("_"))


@dataclass
class Visit:
    problems: list[str] = field(default_factory=list)   # console errors, failed requests, calls to the network
    images: list[dict] = field(default_factory=list)    # every <img> of the article: src, alt, decoded
    links: list[str] = field(default_factory=list)      # every href, resolved
    ids: set[str] = field(default_factory=set)


ARTICLE_IMAGES = """() => Array.from(document.querySelectorAll('.bd-article img')).map(i => ({
    src: i.getAttribute('src'), alt: i.getAttribute('alt') || '', decoded: i.complete && i.naturalWidth > 0,
    figure: !!i.closest('.cell_output') || i.classList.contains('course-figure')}))"""


def visit(browser, url: str, width: int) -> tuple[Visit, object]:
    page = browser.new_page(viewport={"width": width, "height": 900})
    seen = Visit()
    host = urllib.parse.urlsplit(url).netloc
    page.on("console", lambda m: seen.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: seen.problems.append(f"failed request: {r.url} ({r.failure})"))
    page.on("response", lambda r: seen.problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.on("request", lambda r: seen.problems.append(f"asks the network: {r.url}")
            if urllib.parse.urlsplit(r.url).netloc not in (host, "") and r.url.startswith("http") else None)
    page.goto(url, wait_until="networkidle")
    seen.images = page.evaluate(ARTICLE_IMAGES)
    seen.links = page.evaluate("() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    seen.ids = set(page.evaluate("() => Array.from(document.querySelectorAll('[id], a[name]'))"
                                 ".map(e => e.id || e.getAttribute('name'))"))
    return seen, page


@pytest.fixture(scope="session")
def desktop(browser, server, built_site) -> dict[str, Visit]:
    """Every page, loaded once at a desktop's width."""
    found = {}
    for name in pages(built_site):
        found[name], page = visit(browser, server + name, DESKTOP)
        page.close()
    return found


def test_every_page_loads_with_no_console_error_and_no_missing_asset(desktop):
    assert len(desktop) >= 2 * len(notebook_paths()) + 5
    problems = [f"{name}: {p}" for name, v in desktop.items() for p in v.problems]
    assert not problems, "\n".join(problems)


def test_each_lesson_page_shows_every_figure_its_notebook_stores_decoded(desktop):
    for path in notebook_paths():
        core, deep = split_core(json.loads(path.read_text()))
        shown = 0
        for doc, cells in ((f"{site.LESSONS}/{path.stem}.html", core), (f"{site.DEEP_DIVES}/{path.stem}.html", deep)):
            if not cells:
                assert doc not in desktop
                continue
            figures = [i for i in desktop[doc].images if i["figure"]]
            assert len(figures) == png_outputs(cells), f"{doc}: {len(figures)} figures, the notebook stores " \
                                                       f"{png_outputs(cells)}"
            assert all(i["decoded"] for i in figures), [i["src"] for i in figures if not i["decoded"]]
            shown += len(figures)
        assert shown == png_outputs(core + deep) > 0, path.name


def test_every_figure_has_alt_text_that_says_what_it_shows(desktop):
    checked = 0
    for name, v in desktop.items():
        alts = [i["alt"] for i in v.images]
        bad = [f"{name}: {i['src']}: {generic_alt(i['alt'])}" for i in v.images if generic_alt(i["alt"])]
        assert not bad, "\n".join(bad)
        once = [a for a in alts if not a.startswith("One of ")]   # a cell's figures share its alt text
        assert len(set(once)) == len(once), f"{name}: two figures with one alt text: {alts}"
        checked += len(alts)
    assert checked >= sum(png_outputs(json.loads(p.read_text())["cells"]) for p in notebook_paths())


def test_every_internal_link_and_anchor_resolves(desktop, server, built_site):
    broken = []
    for name, v in desktop.items():
        for href in v.links:
            if not href.startswith(server):
                continue
            target, _, anchor = href[len(server):].partition("#")
            target = urllib.parse.unquote(target.split("?")[0]) or "index.html"
            path = built_site / target
            if target.endswith("/"):
                path = path / "index.html"
            if not path.is_file():
                broken.append(f"{name}: {href} (no file {target})")
            elif anchor and path.suffix == ".html":
                page = path.relative_to(built_site).as_posix()
                if page in desktop and urllib.parse.unquote(anchor) not in desktop[page].ids:
                    broken.append(f"{name}: {href} (no #{anchor} in {page})")
    assert not broken, "\n".join(broken[:40])
    assert sum(len(v.links) for v in desktop.values()) > 500


def test_the_readmes_links_to_the_website_name_pages_and_anchors_it_has(desktop):
    links = re.findall(re.escape(site.site_url()) + r"([^)\s>]+)", (ROOT / "README.md").read_text())
    assert links
    for link in links:
        page, _, anchor = link.partition("#")
        assert page in desktop, link
        assert not anchor or anchor in desktop[page].ids, link


def test_the_generated_tables_are_the_ones_the_tools_make(browser, server):
    """The GPU table (tools.gpu_matrix) on the home page and the reading-time table (tools.reading_time) on the
    workshop page, cell for cell."""
    generated = (("index.html", gpu_matrix.table()), ("workshop.html", reading_time.table(reading_time.read_all())))
    for doc, markdown in generated:
        _, page = visit(browser, server + doc, DESKTOP)
        tables = page.evaluate("() => Array.from(document.querySelectorAll('.bd-article table')).map(t => "
                               "Array.from(t.querySelectorAll('tr')).map(r => Array.from(r.children).map("
                               "c => c.textContent.trim())))")
        page.close()
        expected = [[re.sub(r"`|\*\*", "", c).strip() for c in row.strip("|").split("|")]
                    for row in markdown.splitlines() if not row.startswith("|---")]
        assert expected in tables, f"{doc} does not show the generated table"


@pytest.mark.parametrize("query, lesson", [("sdpa_backward", "05"), ("execute_plan_at_index", "03")])
def test_search_finds_the_lesson_that_teaches_a_call(browser, server, query, lesson):
    page = browser.new_page()
    page.goto(f"{server}search.html?q={query}", wait_until="networkidle")
    page.wait_for_selector("#search-results ul.search li", timeout=30_000)
    found = page.evaluate("() => Array.from(document.querySelectorAll('#search-results ul.search li a'))"
                          ".map(a => a.getAttribute('href'))")
    page.close()
    stem = next(p.stem for p in notebook_paths() if p.name.startswith(lesson))
    lesson_pages = (f"{site.LESSONS}/{stem}.html", f"{site.DEEP_DIVES}/{stem}.html")
    assert any(page_name in href for href in found for page_name in lesson_pages), found


PROSE_OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const scrollsInside = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX === 'auto' || s.overflowX === 'scroll') return true;
    }
    return false;
  };
  const prose = '.bd-article :is(p, li, h1, h2, h3, h4, dt, dd, blockquote, figcaption, .admonition)';
  const wide = Array.from(document.querySelectorAll(prose)).filter(el => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && (r.right > width + 1 || el.scrollWidth > el.clientWidth + 1) && !scrollsInside(el);
  }).map(el => el.tagName + ': ' + el.textContent.trim().slice(0, 60));
  return {page: document.documentElement.scrollWidth, width, wide};
}"""


def test_at_a_phones_width_no_prose_needs_horizontal_scrolling(browser, server, built_site):
    problems = []
    for name in pages(built_site):
        _, page = visit(browser, server + name, PHONE)
        found = page.evaluate(PROSE_OVERFLOW)
        page.close()
        if found["page"] > found["width"]:
            problems.append(f"{name}: the page is {found['page']} px wide at {found['width']} px")
        problems += [f"{name}: {w}" for w in found["wide"]]
    assert not problems, "\n".join(problems[:40])


def test_the_workflows_run_the_ci_script_and_publish_what_make_site_builds():
    cpu = (ROOT / ".github/workflows/cpu-tests.yml").read_text()
    assert re.search(r"^\s*run: bash \.ci/run\s*$", cpu, re.M)
    ci = (ROOT / ".ci/run").read_text()
    assert ci.index("make site ") < ci.index("make test ") and "apt-get install" in ci
    pages = (ROOT / ".github/workflows/site.yml").read_text()
    assert re.search(r"^\s*run: make site\b", pages, re.M) and "branches: [main]" in pages
    uploaded = re.search(r"upload-pages-artifact@\S+\s+with:\s+path: (\S+)", pages)[1]
    assert ROOT / uploaded == site.HTML


def test_staging_again_leaves_no_stale_page(tmp_path):
    """A renamed notebook or a section gone must not stay published: what a staging did not write is removed."""
    site.stage(tmp_path)
    stale = tmp_path / site.LESSONS / "99_renamed.ipynb"
    stale.write_text("{}")
    site.stage(tmp_path)
    assert not stale.exists()
    assert sorted(p.name for p in (tmp_path / site.LESSONS).glob("*.ipynb")) == [p.name for p in notebook_paths()]
    assert any((tmp_path / site.GENERATED / "plots").glob("*.png"))
