#!/usr/bin/env bash
# Fetch the JavaScript that the website serves itself, so that no page
# requests anything from another host (the site works offline): MathJax 3
# for the formulas.  (The live explorers are d2lmini/live.js, in the
# notebooks' outputs; the website shows no Jupyter widgets.)
# Only the package tarball is fetched (`npm pack`, no dependency tree).
# They go to assets/vendor/ (git-ignored), which Sphinx copies to
# _build/html/_static/vendor/ (see html_static_path in _config.yml).
set -euo pipefail

MATHJAX=3.2.2

cd "$(dirname "$0")/.."
dest=assets/vendor
command -v npm >/dev/null || {
    echo "vendor_js.sh: npm is needed (Debian: apt-get install -y npm)" >&2
    exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && npm pack --silent "mathjax@$MATHJAX" >/dev/null)
mkdir -p "$tmp/mj"
tar -xzf "$tmp/mathjax-$MATHJAX.tgz" -C "$tmp/mj"

# Assemble in a scratch folder, then swap it in: an interrupted run never
# leaves a half-filled assets/vendor/ behind.
new="$tmp/vendor"
mkdir -p "$new"
cp -r "$tmp/mj/package/es5" "$new/mathjax"
printf 'mathjax %s\n' "$MATHJAX" > "$new/VERSIONS"
touch "$new/.complete"

rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$new" "$dest"
echo "vendor_js.sh: $(du -sh "$dest" | cut -f1) in $dest (MathJax $MATHJAX)"
