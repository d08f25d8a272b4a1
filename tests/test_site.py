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
    assert site.terms_in("graph.check_support(handle)", terms) == ["support check", "handle"]
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
                  if not any(part.startswith("_") for part in p.relative_to(html).parts))


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
        seen, page = visit(browser, server + name, PHONE)
        found = page.evaluate(PROSE_OVERFLOW)
        page.close()
        problems += [f"{name}: {p}" for p in seen.problems]   # 0 console errors, 0 failed requests here too
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


# ------------------------------------------------------------------ issue 49: a site a learner reads with pleasure
from tools import site_results  # noqa: E402

SCREENS = {DESKTOP: 800, PHONE: 844}          # the two screens every reading check runs at
WIDTHS = pytest.mark.parametrize("width", [DESKTOP, PHONE], ids=["desktop", "phone"])


def lesson_stem(number: str) -> str:
    return next(p.stem for p in notebook_paths() if p.name.startswith(number))


def opened(browser, server, path: str, width: int):
    """A page at one of the two screens, with the problems it met (console errors, failed requests)."""
    page = browser.new_page(viewport={"width": width, "height": SCREENS[width]})
    problems = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("requestfailed", lambda r: problems.append(f"failed request: {r.url}"))
    page.goto(server + path, wait_until="networkidle")
    page.problems = problems
    return page


def test_figures_use_the_alt_text_the_run_stored_else_the_code_and_keep_their_size():
    """The contract with the toolbox: ``output["metadata"]["image/png"]["alt"]`` wins where a run stored it."""
    code = "# the loss curves\nplt.plot(x, y)\nplt.show()\n"
    png = {"output_type": "display_data", "data": {"image/png": "iVBOR"}, "metadata": {}}
    told = copy_of(png, metadata={"image/png": {"alt": "Loss falls  from 2.3 to 0.4 over 100 steps."}})
    nb = {"cells": [{"cell_type": "code", "source": code, "metadata": {}, "outputs": [told, png]}]}
    lesson = site.Lesson("99", "99_x", "99 · X", 1, 1)
    cell, = site.staged_cells(nb, nb["cells"], 0, lesson, lambda i: {})
    assert cell["metadata"]["course_alts"] == ["Loss falls from 2.3 to 0.4 over 100 steps.",
                                               "One of 2 figures: the loss curves."]
    options = cell["metadata"]["mystnb"]["image"]
    assert options["scale"] == "100" and "width" not in options, "natural size, capped by CSS, linked full size"


def copy_of(output: dict, **changes) -> dict:
    return {**json.loads(json.dumps(output)), **changes}


def test_printed_lines_keep_their_place_after_a_figure():
    outputs = [{"output_type": "stream", "name": "stdout", "text": "before\n"},
               {"output_type": "stream", "name": "stdout", "text": ["more\n"]},
               {"output_type": "display_data", "data": {"image/png": "x"}, "metadata": {}},
               {"output_type": "stream", "name": "stdout", "text": "10%\r100%\nafter\n"}]
    joined = site.ordered_streams(outputs)
    assert [o["output_type"] for o in joined] == ["stream", "display_data", "stream"]
    assert joined[0]["text"] == "before\nmore\n" and joined[2]["text"] == "100%\nafter\n"
    conf = (ROOT / "site" / "conf.py").read_text()
    assert re.search(r"^nb_merge_streams = False", conf, re.M), "MyST-NB's merge lifts them above the figure"


def test_results_numbers_are_rounded_and_every_ratio_reads_one_way():
    assert site_results.significant(5.25827e-05) == "5.26\u00a0×\u00a010⁻⁵"
    assert [site_results.significant(v) for v in (1237.26, 0.085632, 2.1833, 33, 0)] == \
        ["1240", "0.0856", "2.18", "33.0", "0"]
    assert site_results.cudnn_version("91900") == "9.19.0" and site_results.cudnn_version("8907") == "8.9.7"
    for path in sorted((ROOT / "results").glob("*.csv")):
        unread = [r["metric"] for r in site_results.read_rows(path)
                  if r["unit"] == "x" and site_results.reading(r["metric"]) is None]
        assert not unread, f"{path.name}: say how these ratios read (tools/site_results.py, reading): {unread}"
    assert site_results.reading("small eager vs fused GPU time") == site_results.Reading("small eager", True)
    assert site_results.reading("fused vs eager (GPU time)") == site_results.Reading("eager", True)
    assert site_results.reading("capstone best rung host µs per fwd+bwd / F.sdpa").higher_is_better is False


def test_deep_dive_pages_are_titled_by_what_they_hold_and_downloads_keep_their_names():
    for path in notebook_paths():
        _, deep = split_core(json.loads(path.read_text()))
        title = site.deep_dives_title(path.name[:2], deep)
        assert title.startswith(f"{path.name[:2]} · Deep dives: ") and len(title) > 40, title
        assert site.handout_name(path.stem) != path.name


# -- in Chromium, at both screens
@WIDTHS
def test_the_home_pages_first_screen_says_what_and_for_whom_and_offers_three_ways_in(browser, server, width):
    page = opened(browser, server, "index.html", width)
    found = page.evaluate("""() => {
      const seen = el => { const r = el.getBoundingClientRect(), s = getComputedStyle(el);
        return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && r.bottom <= innerHeight; };
      const links = Array.from(document.querySelectorAll('.bd-article a')).filter(seen)
        .map(a => [a.textContent.trim(), a.href]);
      const boxes = Array.from(document.querySelectorAll('.search-button-field, form.bd-search input'))
        .filter(el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; }).length;
      const article = document.querySelector('.bd-header-article, .bd-article').getBoundingClientRect().top;
      const text = document.querySelector('.bd-article').innerText;
      return {links, boxes, top: article, forWhom: /For whom/.test(text)};
    }""")
    page.close()
    texts = dict(found["links"])
    assert "colab.research.google.com" in texts.get("Start 01 in Colab", ""), found["links"]
    assert "Read 01 here" in texts and "Run it locally" in texts, found["links"]
    assert found["forWhom"]
    assert found["boxes"] <= 1 and (width == PHONE or found["boxes"] == 1), f"{found['boxes']} search boxes"
    assert found["top"] <= 1, f"an empty strip of {found['top']} px above the page"


@WIDTHS
def test_no_api_index_name_runs_over_two_lines(browser, server, width):
    page = opened(browser, server, "api.html", width)
    lines = page.evaluate("""() => Array.from(document.querySelectorAll('.course-api td:first-child')).map(td => {
      const range = document.createRange(); range.selectNodeContents(td);
      const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
      return [td.textContent.trim(), tops.size]; })""")
    page.close()
    assert len(lines) > 50
    over = [f"{name}: {n} lines" for name, n in lines if n > 2]
    assert not over, "\n".join(over[:20])


@WIDTHS
def test_lesson_code_has_copy_buttons_and_fits_or_scrolls_in_its_box(browser, server, width):
    page = opened(browser, server, f"{site.LESSONS}/{lesson_stem('02')}.html", width)
    found = page.evaluate("""() => {
      const cells = Array.from(document.querySelectorAll('.bd-article .cell_input'));
      const pre = cells[1].querySelector('pre'), probe = document.createElement('span');
      probe.textContent = 'x'.repeat(88); pre.appendChild(probe);
      const line = probe.getBoundingClientRect().width; probe.remove();
      const s = getComputedStyle(pre);
      return {cells: cells.length, buttons: cells.filter(c => c.querySelector('button.copybtn')).length, line,
              inner: pre.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight),
              overflow: s.overflowX, page: document.documentElement.scrollWidth, width: innerWidth};
    }""")
    page.close()
    assert found["cells"] > 10 and found["buttons"] == found["cells"], found
    if width == DESKTOP:
        assert found["inner"] >= found["line"], f"an 88-column line needs {found['line']:.0f} px, the box has " \
                                                f"{found['inner']:.0f}"
    assert found["overflow"] in ("auto", "scroll") and found["page"] <= found["width"], found


@WIDTHS
@pytest.mark.parametrize("query, number", [("conv_fprop", "02"), ("create_execution_plans", "01"),
                                           ("plan cache", "06")])
def test_search_puts_the_lesson_that_teaches_it_first_with_a_snippet_of_content(browser, server, width, query,
                                                                                 number):
    page = opened(browser, server, "search.html?q=" + urllib.parse.quote(query), width)
    page.wait_for_selector("#search-results ul.search li", timeout=30_000)
    page.wait_for_function("() => document.querySelectorAll('#search-results ul.search li p.context').length >= 2",
                           timeout=30_000)
    hits = page.evaluate("""() => Array.from(document.querySelectorAll('#search-results ul.search li')).map(li =>
        ({href: li.querySelector('a').getAttribute('href'), text: li.textContent}))""")
    problems = page.problems
    page.close()
    first = hits[0]["href"]
    assert first.split("/")[-1].startswith(f"{lesson_stem(number)}.html") and "deep_dives" not in first, hits[:3]
    assert "#" in first, f"the hit opens at the top of the page: {first}"
    theme = [h["text"][:80] for h in hits if re.search(r"System Settings|Light Dark|\bContents\b", h["text"])]
    assert not theme, theme
    assert not problems, problems


@WIDTHS
def test_the_results_page_is_a_summary(browser, server, built_site, width):
    page = opened(browser, server, "results.html", width)
    found = page.evaluate("""() => ({
      text: document.querySelector('.bd-article').innerText,
      csv: Array.from(document.querySelectorAll('.bd-article a')).map(a => a.getAttribute('href'))
             .filter(h => h && h.endsWith('.csv')),
      boxes: Array.from(document.querySelectorAll('.bd-article table')).map(t =>
             [t.getBoundingClientRect().width, Math.max(...Array.from(t.rows).map(r => r.getBoundingClientRect().width))]),
      headers: Array.from(document.querySelectorAll('.bd-article table th')).map(th => th.textContent.trim()),
    })""")
    problems = page.problems
    page.close()
    numbers = re.findall(r"(?<![\w.])\d[\d.]*(?:e-?\d+)?", found["text"].replace("\u00a0", " "))
    digits = lambda n: len(n.split("e")[0].replace(".", "").lstrip("0").rstrip("0" if "." not in n else ""))
    long = [n for n in numbers if digits(n) > 4 and not re.fullmatch(r"20\d\d", n) and "-" not in n]
    assert not long, f"numbers with more than 4 significant digits: {long[:10]}"
    assert "91900" not in found["text"] and "cuDNN 9.19.0" in found["text"]
    assert not re.search(r"\d(?:\.\d+)?x\b", found["text"]), "ratios are written with ×"
    assert {"rival", "bar"} <= set(found["headers"])
    assert found["csv"] and (built_site / "results.html").parent.joinpath(found["csv"][0]).is_file()
    empty = [b for b in found["boxes"] if b[0] > b[1] + 4]
    assert not empty, f"tables bordered wider than their rows: {empty}"
    assert not problems, problems


@WIDTHS
def test_figures_show_at_their_size_and_open_full_size(browser, server, width):
    page = opened(browser, server, f"{site.LESSONS}/{lesson_stem('02')}.html", width)
    figures = page.evaluate("""() => Array.from(document.querySelectorAll('.bd-article .cell_output img')).map(i => ({
        shown: i.getBoundingClientRect().width, natural: i.naturalWidth,
        column: i.closest('.cell_output').getBoundingClientRect().width,
        link: i.closest('a') ? i.closest('a').getAttribute('href') : null}))""")
    page.close()
    assert figures
    for f in figures:
        assert f["link"] and f["link"].endswith(".png"), f
        assert f["shown"] <= min(f["natural"], f["column"]) + 1, f


def figure_then_text() -> list[tuple[str, str, str]]:
    """(page part, notebook, the first line of a text) for each stored cell that prints text after its figure."""
    found = []
    for path in notebook_paths():
        nb = json.loads(path.read_text())
        for part, cells in zip((site.LESSONS, site.DEEP_DIVES), split_core(nb)):
            for cell in cells:
                outputs, figure = cell.get("outputs", []), False
                for out in outputs:
                    figure = figure or "image/png" in out.get("data", {})
                    text = "".join(out.get("text", "")).strip() if out.get("output_type") == "stream" else ""
                    if figure and text:
                        found.append((part, path.name[:2], text.splitlines()[0][:40]))
                        break
    return found


@WIDTHS
def test_lines_printed_after_a_figure_stay_below_it(browser, server, width):
    cases = figure_then_text()
    if not cases:
        pytest.skip("no stored cell prints text after its figure")
    for part, nb, line in cases:
        page = opened(browser, server, f"{part}/{lesson_stem(nb)}.html", width)
        order = page.evaluate("""(line) => {
          const outputs = Array.from(document.querySelectorAll('.cell_output')).filter(o => o.textContent.includes(line));
          return outputs.map(o => Array.from(o.querySelectorAll('img, pre')).map(e =>
              e.tagName === 'IMG' ? 'figure' : (e.textContent.includes(line) ? 'note' : 'text')));
        }""", line)
        page.close()
        assert order and all("figure" in o and o.index("figure") < o.index("note") for o in order), (nb, line, order)


@WIDTHS
def test_navigation_next_lesson_titles_glossary_recipes_source(browser, server, width):
    page = opened(browser, server, f"{site.LESSONS}/{lesson_stem('02')}.html", width)
    found = page.evaluate("""() => ({
      next: (document.querySelector('a.right-next') || {}).href || '',
      recipes: Array.from(document.querySelectorAll('.bd-article a')).map(a => a.href).filter(h => /helpers\\/recipes\\//.test(h)),
      source: Array.from(document.querySelectorAll('p.course-source a')).map(a => a.href),
      downloads: Array.from(document.querySelectorAll('.course-actions a')).map(a => a.getAttribute('href')),
      text: document.querySelector('.bd-article').innerText})""")
    page.close()
    assert found["next"].endswith(f"{site.LESSONS}/{lesson_stem('03')}.html"), found["next"]
    assert found["recipes"] and len(found["source"]) == 2 and "/issues/new" in found["source"][1]
    names = [h.rsplit("/", 1)[-1] for h in found["downloads"] if "_downloads/" in h]
    assert len(names) == 2 and len(set(names)) == 2, names
    assert "checkout of the course" in found["text"]
    glossary = opened(browser, server, "glossary.html", width)
    terms = glossary.evaluate("() => Array.from(document.querySelectorAll('dl.glossary dt')).map(d => d.textContent.replace(/#$/, '').trim())")
    glossary.close()
    assert {"handle", "AMAX", "epilogue", "descale", "pygraph", "virtual tensor"} <= set(terms), terms
    deep = opened(browser, server, f"{site.DEEP_DIVES}/{lesson_stem('02')}.html", width)
    title = deep.evaluate("() => document.querySelector('.bd-article h1').textContent")
    deep.close()
    assert "Deep dives: " in title, title
    exercises = opened(browser, server, "exercises.html", width)
    text = exercises.evaluate("() => document.querySelector('.bd-article').innerText")
    exercises.close()
    assert "exists only once a maintainer has published" in text


def test_the_whole_course_prints_from_one_page(built_site, desktop):
    one = built_site / site.PRINT / "index.html"
    assert one.is_file()
    text = one.read_text()
    for path in notebook_paths():
        assert site.title(json.loads(path.read_text())) in html_unescape(text), path.name
    assert f"{site.PRINT}/index.html" in pages(built_site) and not desktop[f"{site.PRINT}/index.html"].problems


def html_unescape(text: str) -> str:
    import html

    return html.unescape(text)
