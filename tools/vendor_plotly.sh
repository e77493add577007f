#!/bin/sh
# Rebuild traceadvisor/report/static/plotly-basic.min.js: plotly.js's own partial bundle with only the trace
# types the reports draw (scatter, bar; the bundle also holds pie), from the npm registry, checked against the
# registry's sha512 integrity. The version matches the plotly.js of the plotly Python package (plotly 7.1.0
# ships plotly.js 4.1.1), so figures serialised by plotly.py render the same. Run from the repository root:
#     sh tools/vendor_plotly.sh
# It needs npm and the registry (only when rebuilding: the report itself loads nothing from the network).
set -eu
VERSION=4.1.1
INTEGRITY=sha512-1oNF8PeQx2hv/y7tqEVWKD3JGwn/MGEMQ8mL9HUwsaqG9FGy/OU5FHUHvzqbqxN4mnwZGI9abTiE775C4kkjMQ==
DEST=traceadvisor/report/static
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "plotly.js-basic-dist-min@$VERSION" >/dev/null)
tgz="$work/plotly.js-basic-dist-min-$VERSION.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | openssl base64 -A)"
if [ "$got" != "$INTEGRITY" ]; then
    echo "integrity mismatch: $got" >&2
    exit 1
fi
tar -xzf "$tgz" -C "$work"
cp "$work/package/plotly-basic.min.js" "$DEST/plotly-basic.min.js"
cp "$work/package/LICENSE" "$DEST/LICENSE-plotly.js.txt"
sha256sum "$DEST/plotly-basic.min.js"
