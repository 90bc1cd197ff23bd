#!/usr/bin/env bash
# Build the image docker-compose.yml runs (trajlake/app), offline: nothing is pulled.
#
#   infra/compose/build-images.sh        (as root, from the repository root, after ./dev test or ./dev demo
#                                          made .venv and a Docker engine answers)
#
# 1. a runtime base: debootstrap of Debian bookworm with python3, python3-venv and
#    openjdk-17-jre-headless (and Debian's prometheus for the monitoring service), imported into the engine (trajlake's own image builder);
# 2. the wheels of the project and its runtime dependencies, built on this host (pip reaches PyPI
#    here; the build container reaches nothing);
# 3. the Kafka broker's and s3proxy's jars as Maven resolved them on this host, with the cached
#    classpaths, so the containers start them without Maven;
# 4. docker build -t trajlake/app infra/compose.
set -euo pipefail
cd "$(dirname "$0")/../.."
ctx="$(mktemp -d /tmp/trajlake-compose.XXXXXX)"
trap 'rm -rf "$ctx"' EXIT
echo "== runtime base (debootstrap; a few minutes the first time)"
base="$(.venv/bin/python - <<'PY'
import docker
from sandboxes.images import DEFAULT_PACKAGES, ImageStore, build_image
from trajlake.settings import Settings
rec, _ = build_image(ImageStore(Settings().image_store), name="trajlake-runtime",
                     packages=(*DEFAULT_PACKAGES, "python3-venv", "openjdk-17-jre-headless", "prometheus"),
                     docker_client=docker.from_env())
print(rec.docker_ref)
PY
)"
echo "base: $base"
echo "== wheels of the project and its runtime dependencies"
.venv/bin/pip wheel -q --wheel-dir "$ctx/wheels" ".[dask,s3]"
echo "== the Kafka and s3proxy jars, as Maven resolved them here"
.venv/bin/python - "$ctx" <<'PY'
import os, shutil, sys
from pathlib import Path
from infra.maven import _cache_file, build_classpath, pom_path
ctx = Path(sys.argv[1])
m2 = Path.home() / ".m2"
(ctx / "cache").mkdir(parents=True)
for component in ("kafka", "s3proxy"):
    pom = pom_path(component)
    for jar in build_classpath(pom, component):
        dest = ctx / "m2" / Path(jar).relative_to(m2)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(jar, dest)
    cache = _cache_file(pom)
    (ctx / "cache" / cache.name).write_text(cache.read_text().replace(str(m2), "/root/.m2"))
PY
cp infra/compose/Dockerfile "$ctx/"
echo "== docker build"
docker build -q -t trajlake/app --build-arg "BASE=$base" "$ctx"
echo "built trajlake/app"
