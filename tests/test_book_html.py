"""Checks of the built website, ``_build/html`` (run ``make book`` first).

Run with ``make browser`` (``pytest -m book tests/test_book_html.py``); a
plain ``pytest`` skips this module. The browser checks drive Debian's
``chromium`` through Playwright (never ``playwright install``) against the
site served by ``http.server`` on 127.0.0.1. For every page listed in
``_toc.yml`` they check that:

- no request goes to another host, and none fails or gets a 4xx/5xx;
- MathJax 3 typesets every formula, without errors and no raw TeX left;
- every image loads, and every drawn figure (chapters/img/*.svg) is
  there with its alt text and stays readable in the dark theme too;
- every live explorer (``d2lmini.live``) starts, and no page shows a
  Jupyter widget (they need a kernel);
- no script error and no console error occurs.

tests/test_site_live.py drives the explorers and translators.

A full-page screenshot of each page goes to ``_build/screenshots/``.
"""

import functools
import importlib.util
import io
import shutil
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from playwright.sync_api import sync_playwright

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
VIEW_MIME = "application/vnd.jupyter.widget-view+json"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
# Counts of what the browser checks found, page by page, for the summary.
CHECKED = {}
CHECKED_FIGURES = {}  # (figure, theme) -> shares of light and dark pixels


def _load_toc_module():
    path = ROOT / "scripts" / "toc_notebooks.py"
    spec = importlib.util.spec_from_file_location("toc_notebooks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def toc_pages():
    """Return the documents of ``_toc.yml`` in reading order, no suffix."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = _load_toc_module().toc_files
    return [toc["root"], *files(toc.get("chapters", [])),
            *files(toc.get("parts", []))]


PAGES = toc_pages()


def page_html(doc):
    return (HTML / f"{doc}.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def site(request):
    """The built site; skipped unless the ``book`` marker was selected."""
    if "book" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("website checks run with `make browser` (-m book)")
    if not (HTML / f"{PAGES[0]}.html").is_file():
        pytest.fail(f"no website in {HTML}: run `make book` first")
    return HTML


@pytest.fixture(scope="module")
def server(site):
    """Serve ``_build/html`` on 127.0.0.1 at a free port (in a thread)."""

    class QuietHandler(SimpleHTTPRequestHandler):
        """Log nothing but record every 4xx/5xx answer.

        The server sees requests that Playwright does not report, such as
        the browser's own request for /favicon.ico.
        """

        def log_message(self, *args):
            pass

        def log_request(self, code="-", size="-"):
            if int(code) >= 400:
                httpd.errors.append(f"{int(code)} {self.path}")

    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.errors = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture(scope="module")
def browser(server):
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).is_file():
        pytest.fail("Debian's chromium is not installed: run `make chromium`")
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(
        executable_path=chromium, args=CHROMIUM_FLAGS)
    yield browser
    browser.close()
    playwright.stop()


class ResourceParser(HTMLParser):
    """Collect every URL that a page loads by itself (not plain links)."""

    LOADING = {"script": "src", "img": "src", "iframe": "src",
               "source": "src", "audio": "src", "video": "src",
               "embed": "src", "link": "href"}
    # <link rel="next" href=...> is a plain link; these rels load.
    LOADING_RELS = {"stylesheet", "preload", "modulepreload", "prefetch",
                    "icon", "apple-touch-icon", "manifest"}

    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        rels = set((attrs.get("rel") or "").lower().split())
        if tag == "link" and not rels & self.LOADING_RELS:
            return
        if self.LOADING.get(tag) in attrs:
            self.urls.append(attrs[self.LOADING[tag]])
        # The widget manager fetches unknown widget code from this CDN.
        if "data-jupyter-widgets-cdn" in attrs:
            self.urls.append(attrs["data-jupyter-widgets-cdn"] or "//cdn")


def is_external(url):
    parts = urlsplit(url)
    return bool(parts.netloc) or parts.scheme not in ("", "data")


def test_every_toc_page_is_built_and_no_other(site):
    missing = [doc for doc in PAGES if not (HTML / f"{doc}.html").is_file()]
    assert not missing, f"pages of _toc.yml not built: {missing}"
    skip = {"index", "genindex", "search"}  # index.html is a redirect
    built = {
        p.relative_to(HTML).with_suffix("").as_posix()
        for p in HTML.rglob("*.html")
        if not p.relative_to(HTML).parts[0].startswith("_")
    } - skip
    assert built == set(PAGES), (
        f"built pages {sorted(built)} differ from _toc.yml {PAGES}")


def test_pages_load_nothing_from_other_hosts(site):
    offenders = {}
    for doc in PAGES:
        parser = ResourceParser()
        parser.feed(page_html(doc))
        external = [url for url in parser.urls if is_external(url)]
        if external:
            offenders[doc] = external
    assert not offenders, (
        f"pages load resources from other hosts: {offenders}; vendor them "
        "(scripts/vendor_js.sh) and point _config.yml at the copies")


def test_pages_show_no_jupyter_widgets(site):
    """Widgets need a kernel: the pages show each widget output's
    text/html alternative, and load no widget manager."""
    for doc in PAGES:
        html = page_html(doc)
        assert VIEW_MIME not in html, f"{doc} shows a Jupyter widget"
        assert "embed-amd.js" not in html and "require.js" not in html, (
            f"{doc} loads the widget manager")


MATH_JS = """async () => {
  const maths = [...document.querySelectorAll('.math')];
  if (maths.length === 0) return {math: 0, containers: 0};
  if (!window.MathJax || !window.MathJax.startup)
    return {math: maths.length, error: 'MathJax is not loaded'};
  await MathJax.startup.promise;
  const rawText = (m) => [...m.childNodes].filter((n) => n.nodeType === 3)
    .map((n) => n.textContent).join('');
  return {
    math: maths.length,
    version: MathJax.version,
    containers: document.querySelectorAll('mjx-container').length,
    errors: [...document.querySelectorAll('mjx-merror')]
      .map((e) => e.textContent),
    raw: maths.filter((m) => !m.querySelector('mjx-container')
                             || /\\\\[([]/.test(rawText(m)))
      .map((m) => m.textContent.trim().slice(0, 80)),
  };
}"""

def images_js(keep="() => true"):
    """A script that loads the page's images that ``keep`` (a JS
    function of an img) selects, eagerly, and lists them: src, alt text
    and whether they loaded."""
    return f"""async () => {{
  const imgs = [...document.images].filter({keep});
  imgs.forEach((i) => {{ i.loading = 'eager'; }});
  const loaded = (i) => i.complete ? null : new Promise((resolve) => {{
    i.addEventListener('load', resolve);
    i.addEventListener('error', resolve);
  }});
  const timeout = new Promise((resolve) => setTimeout(resolve, 15000));
  await Promise.race([Promise.all(imgs.map(loaded)), timeout]);
  return imgs.map((i) => ({{src: i.getAttribute('src'), alt: i.alt,
                           ok: i.complete && i.naturalWidth > 0}}));
}}"""


IMAGES_JS = images_js()
# The chapter's drawn figures, as Jupyter Book serves them.
FIGURES_JS = images_js(
    r"(i) => /\/_images\/[^/]+\.svg$/.test(i.getAttribute('src'))")

# Every live explorer started: live.js marked it and drew into it.
LIVE_JS = """() => [...document.querySelectorAll('[data-d2l-live]')].map(
  (e) => ({kind: e.dataset.d2lLive, ok: e.dataset.d2lMounted === '1'
           && e.getBoundingClientRect().height > 0}))"""


@pytest.mark.parametrize("doc", PAGES)
def test_page_in_browser(doc, server, browser):
    url = f"http://127.0.0.1:{server.server_address[1]}/{doc}.html"
    external, failed, page_errors = [], [], []
    served_before = len(server.errors)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()

    def route(request_route):
        if urlsplit(request_route.request.url).hostname == "127.0.0.1":
            request_route.continue_()
        else:
            external.append(request_route.request.url)
            request_route.abort()

    page.route("**/*", route)
    page.on("requestfailed", lambda r: failed.append(
        f"{r.url} ({r.failure})"))
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    console_errors = []
    page.on("console", lambda m: console_errors.append(m.text)
            if m.type == "error" else None)
    try:
        page.goto(url, wait_until="networkidle")
        math = page.evaluate(MATH_JS)
        live = page.evaluate(LIVE_JS)
        images = page.evaluate(IMAGES_JS)
        page.wait_for_load_state("networkidle")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / f"{doc.replace('/', '-')}.png",
                        full_page=True)
    finally:
        context.close()
    bad_status = server.errors[served_before:]

    problems = []
    if external:
        problems.append(f"requests to other hosts: {external}")
    failed = [f for f in failed if f.split(" (")[0] not in external]
    if failed:
        problems.append(f"failed requests: {failed}")
    if bad_status:
        problems.append(f"error responses: {bad_status}")
    # Any script error or console error fails the page: a reader's
    # console must stay clean (sphinx-thebe's doubled script and the
    # old widget manager's MathJax 2 call once threw on every page).
    if page_errors:
        problems.append(f"script errors: {page_errors}")
    if console_errors:
        problems.append(f"console errors: {console_errors}")
    if "error" in math:
        problems.append(math["error"])
    elif math["math"]:
        if not math["version"].startswith("3."):
            problems.append(f"MathJax {math['version']}, not 3.x")
        if math["errors"]:
            problems.append(f"MathJax errors: {math['errors']}")
        if math["raw"]:
            problems.append(f"formulas left as TeX: {math['raw']}")
    broken = [i["src"] for i in images if not i["ok"]]
    if broken:
        problems.append(f"images that did not load: {broken}")
    dead = [v["kind"] for v in live if not v["ok"]]
    if dead:
        problems.append(f"live explorers that did not start: {dead}")
    assert not problems, f"{doc}:\n" + "\n".join(problems)
    CHECKED[doc] = {"formulas": math["containers"], "images": len(images),
                    "explorers": len(live)}


def _luminance(png):
    """Per-pixel luminance (0 to 255) of a PNG screenshot, as a list."""
    from PIL import Image
    gray = Image.open(io.BytesIO(png)).convert("L")
    return list(gray.tobytes())  # one byte a pixel (mode "L")


def _background_luminance(page):
    rgb = page.evaluate("""() => getComputedStyle(document.body)
                           .backgroundColor.match(/\\d+/g).map(Number)""")
    return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]


def test_figures_are_shown_with_alt_text_in_light_and_dark(
        server, browser):
    """Every drawn figure is on a page, with its alt text; in the light
    and the dark theme (the dark page's background is dark: the switch
    took) it is drawn mostly light, its own background, with dark lines
    and text on it (at least 0.5 % of its pixels)."""
    figures = {p.name for p in (ROOT / "chapters" / "img").glob("*.svg")}
    seen, measured = set(), {}
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        for doc in PAGES:
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/"
                      f"{doc}.html", wait_until="networkidle")
            for theme in ("light", "dark"):
                page.evaluate(f"""() => {{
                    document.documentElement.dataset.theme = '{theme}';
                    document.documentElement.dataset.mode = '{theme}'; }}""")
                page.wait_for_timeout(100)
                background = _background_luminance(page)
                assert (background < 80) == (theme == "dark"), (
                    f"{doc}: the {theme} theme has a page background of "
                    f"luminance {background:.0f}")
                imgs = page.evaluate(FIGURES_JS)
                for i, img in enumerate(imgs):
                    name = img["src"].rsplit("/", 1)[1]
                    assert img["ok"], f"{doc}: {name} did not load"
                    assert len(img["alt"].split()) >= 8, (
                        f"{doc}: {name} has alt text {img['alt']!r}")
                    element = page.locator(
                        "img[src$='.svg'][src*='_images/']").nth(i)
                    element.scroll_into_view_if_needed()
                    pixels = _luminance(element.screenshot())
                    light = sum(v > 180 for v in pixels) / len(pixels)
                    dark = sum(v < 100 for v in pixels) / len(pixels)
                    measured[(name, theme)] = (light, dark)
                    assert light > 0.6 and dark > 0.005, (
                        f"{doc}: {name} in the {theme} theme: "
                        f"{light:.1%} light and {dark:.1%} dark pixels")
                    seen.add(name)
            page.close()
    finally:
        context.close()
    # Served figures carry a hash or the same name: match on the stem.
    missing = [f for f in figures
               if not any(s.startswith(f[:-4]) for s in seen)]
    assert not missing, f"figures on no page: {missing}"
    CHECKED_FIGURES.update(measured)


def test_browser_summary(site, capsys):
    """Every page was checked in the browser; print what was counted."""
    unchecked = [doc for doc in PAGES if doc not in CHECKED]
    assert not unchecked, f"pages that failed the browser check: {unchecked}"
    totals = {key: sum(c[key] for c in CHECKED.values())
              for key in ("formulas", "images", "explorers")}
    with capsys.disabled():
        for (name, theme), (light, dark) in sorted(CHECKED_FIGURES.items()):
            print(f"{name} ({theme}): {light:.0%} light, {dark:.1%} dark "
                  "pixels")
        print(f"\nbrowser check: {len(CHECKED)} pages, "
              f"{totals['formulas']} formulas, {totals['images']} images, "
              f"{totals['explorers']} live explorers; screenshots in "
              f"{SHOTS}")


def test_pages_carry_no_thebe_script(site):
    """_ext/offline_site.py leaves sphinx-thebe's scripts out."""
    for doc in PAGES:
        html = page_html(doc)
        assert "THEBE_JS_URL" not in html and "sphinx-thebe.js" not in html, (
            f"{doc} still loads sphinx-thebe's scripts")


def _links(doc):
    """The href of every <a> of a built page."""
    hrefs = []

    class Links(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "a" and dict(attrs).get("href"):
                hrefs.append(dict(attrs)["href"])

    Links().feed(page_html(doc))
    return hrefs


def _served(doc, href):
    """The file of the site that a link of ``doc`` points to."""
    path = unquote(urlsplit(href).path)
    return (HTML / doc).parent.joinpath(path).resolve()


def test_a_reader_can_download_the_chapter_and_each_notebook(site):
    """The opener links the chapter's archive, served by the site itself;
    every notebook page links its own .ipynb."""
    archive = [h for h in _links(PAGES[0])
               if h.endswith("attention-chapter.zip")]
    assert archive, "the opener does not link attention-chapter.zip"
    for href in archive:
        assert not is_external(href), href
        assert _served(PAGES[0], href).is_file(), (
            f"{href} is linked but not in the site; run `make book`")
    for doc in PAGES:
        if not (ROOT / f"{doc}.ipynb").is_file():
            continue
        ipynb = [h for h in _links(doc)
                 if h.split("?")[0].endswith(f"{Path(doc).name}.ipynb")
                 and not is_external(h)]
        assert ipynb and all(_served(doc, h).is_file() for h in ipynb), (
            f"{doc}: no working link to its .ipynb ({ipynb})")
