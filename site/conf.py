"""Sphinx configuration of the course website. Build it with `make site` (tools/site.py stages these sources beside
the pages it generates, then runs Sphinx); the notebooks are rendered with their stored outputs, never executed."""
from tools import fork

project = "cuDNN Frontend, hands on"
author = "the course's authors"
copyright = "the course's authors, Apache-2.0"

extensions = ["myst_nb", "sphinx.ext.githubpages", "sphinx_copybutton", "tools.site"]
exclude_patterns = ["_generated/*.md", "downloads/**", "**/.ipynb_checkpoints"]

# MyST-NB: the stored outputs of the GPU run, in the order the run printed them (tools.site joins only adjacent
# printed chunks; merging every stream of a cell would lift lines printed after a figure above it)
nb_execution_mode = "off"
nb_merge_streams = False
nb_output_stderr = "show"
myst_enable_extensions = ["colon_fence", "dollarmath", "attrs_inline"]
myst_heading_anchors = 0
html_math_renderer = "mathtext"   # tools.site: TeX drawn at build time, no MathJax to fetch

# A copy button on every code cell's input, not on its outputs; the prompt-free code copies as it is
copybutton_selector = "div.cell_input div.highlight pre, div.highlight-bash pre, div.highlight-python pre"
copybutton_exclude = ".linenos, .gp"

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_js_files = ["course.js"]                  # search ranking and snippets, figures' full-size links
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "repository_url": f"https://github.com/{fork.repository()}",
    "use_repository_button": True,
    "use_download_button": False,   # each lesson offers the notebook itself and its hand-out
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
}
html_favicon = "_static/favicon.svg"          # else browsers ask for /favicon.ico, which a static host lacks
html_context = {"default_mode": "auto"}       # light or dark, as the reader's system says
