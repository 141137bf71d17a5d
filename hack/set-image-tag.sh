#!/usr/bin/env bash
# Usage: hack/set-image-tag.sh vX.Y.Z   (make set-image-tag TAG=vX.Y.Z)
#
# Makes vX.Y.Z the release this tree builds, in every place that names it:
#   - the Makefile's VERSION (what make build links into the binaries),
#   - the Dockerfile's ARG VERSION (what an image build links in),
#   - the tag of every ghcr.io/elasti-dev/elasti-* image in manifests/ and
#     deploy/ (a digest after the old tag is dropped: it named the old image),
#   - charts/elasti's appVersion (the image tag the chart runs by default)
#     and its chart version (the same, without the v).
# Refuses an empty tag, `latest`, and anything that is not a release version.
# test/release's tests check that all of these agree.
set -euo pipefail
cd "$(dirname "$0")/.."

tag="${1:-}"
if [[ -z "$tag" ]]; then
  echo "set-image-tag: no tag given; use: make set-image-tag TAG=vX.Y.Z" >&2
  exit 2
fi
if [[ "$tag" == latest ]]; then
  echo "set-image-tag: refusing \"latest\": a moving tag installs whatever was pushed last, not a release" >&2
  exit 2
fi
# A release version that is also a valid image tag (no "+build" suffix:
# image tags cannot hold "+").
if [[ ! "$tag" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z][0-9A-Za-z.-]*)?$ ]]; then
  echo "set-image-tag: \"$tag\" is not a release version such as v1.2.3 or v1.2.3-rc.1" >&2
  exit 2
fi

files=()
while IFS= read -r -d '' f; do
  files+=("$f")
done < <(find manifests deploy -type f \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) -print0 | sort -z)

# An `image:` field naming an elasti image, with its tag and digest if any.
image='^([[:space:]]*(-[[:space:]]+)?image:[[:space:]]*["'"'"']?ghcr\.io/elasti-dev/elasti-[a-z-]+)(:[A-Za-z0-9_.-]+)?(@sha256:[0-9a-f]+)?'
changed=0
for f in "${files[@]}"; do
  if grep -Eq "$image" "$f"; then
    sed -i -E "s#${image}#\\1:${tag}#" "$f"
    echo "set-image-tag: $f"
    changed=$((changed + 1))
  fi
done
if ((changed == 0)); then
  echo "set-image-tag: no elasti image found in manifests/ or deploy/" >&2
  exit 1
fi

sed -i -E "s/^VERSION[[:space:]]*:=.*/VERSION := ${tag}/" Makefile
sed -i -E "s/^ARG VERSION=.*/ARG VERSION=${tag}/" Dockerfile
grep -q "^VERSION := ${tag}\$" Makefile || { echo "set-image-tag: Makefile has no 'VERSION :=' line" >&2; exit 1; }
grep -q "^ARG VERSION=${tag}\$" Dockerfile || { echo "set-image-tag: Dockerfile has no 'ARG VERSION=' line" >&2; exit 1; }
chart=charts/elasti/Chart.yaml
sed -i -E -e "s/^appVersion:.*/appVersion: ${tag}/" -e "s/^version:.*/version: ${tag#v}/" "$chart"
grep -q "^appVersion: ${tag}\$" "$chart" && grep -q "^version: ${tag#v}\$" "$chart" ||
  { echo "set-image-tag: $chart has no 'version:' or 'appVersion:' line" >&2; exit 1; }
echo "set-image-tag: Makefile VERSION, Dockerfile ARG VERSION and $chart are ${tag}"
