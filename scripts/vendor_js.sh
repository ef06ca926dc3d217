#!/usr/bin/env bash
# Fetch the JavaScript that the website serves itself, so that no page
# requests anything from another host (the site works offline):
#   MathJax 3 (formulas), require.js and the Jupyter widgets HTML manager
#   (static widgets).
# Only the package tarballs are fetched (`npm pack`, no dependency tree).
# They go to assets/vendor/ (git-ignored), which Sphinx copies to
# _build/html/_static/vendor/ (see html_static_path in _config.yml).
set -euo pipefail

MATHJAX=3.2.2
HTMLMGR=1.0.15
REQUIREJS=2.3.7

cd "$(dirname "$0")/.."
dest=assets/vendor
command -v npm >/dev/null || {
    echo "vendor_js.sh: npm is needed (Debian: apt-get install -y npm)" >&2
    exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && npm pack --silent "mathjax@$MATHJAX" \
    "@jupyter-widgets/html-manager@$HTMLMGR" "requirejs@$REQUIREJS" \
    >/dev/null)
mkdir -p "$tmp/mj" "$tmp/hm" "$tmp/rq"
tar -xzf "$tmp/mathjax-$MATHJAX.tgz" -C "$tmp/mj"
tar -xzf "$tmp/jupyter-widgets-html-manager-$HTMLMGR.tgz" -C "$tmp/hm"
tar -xzf "$tmp/requirejs-$REQUIREJS.tgz" -C "$tmp/rq"

# Assemble in a scratch folder, then swap it in: an interrupted run never
# leaves a half-filled assets/vendor/ behind.
new="$tmp/vendor"
mkdir -p "$new/widgets"
cp -r "$tmp/mj/package/es5" "$new/mathjax"
cp "$tmp/hm/package/dist/embed-amd.js" "$new/widgets/"
for ext in woff woff2 ttf eot svg; do
    find "$tmp/hm/package/dist" -maxdepth 1 -name "*.$ext" \
        -exec cp {} "$new/widgets/" \;
done
cp "$tmp/rq/package/require.js" "$new/require.js"
# embed-amd.js loads its fonts relative to its AMD module path; point that
# path at the local copy (otherwise the fonts 404 under each page's folder).
cat > "$new/widgets-paths.js" <<'JS'
(function () {
  var src = document.currentScript.src.split("?")[0];
  var base = src.slice(0, src.lastIndexOf("/") + 1) + "widgets";
  require.config({ paths: { "@jupyter-widgets/html-manager/dist": base } });
})();
JS
printf 'mathjax %s\nhtml-manager %s\nrequirejs %s\n' \
    "$MATHJAX" "$HTMLMGR" "$REQUIREJS" > "$new/VERSIONS"
touch "$new/.complete"

rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$new" "$dest"
echo "vendor_js.sh: $(du -sh "$dest" | cut -f1) in $dest" \
    "(MathJax $MATHJAX, html-manager $HTMLMGR, require.js $REQUIREJS)"
