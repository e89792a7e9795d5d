"""Which Debian packages the technical training pairs come from, and which they never may (issue 31).

The packages are fetched with `apt-get download` and unpacked with `dpkg-deb -x` under DEBS, never
installed. KEPT_OUT and TEST_SETS hold independent checks: guard() refuses them, and every other
binary of their source packages, wherever a package is about to be used.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sparc_local.errors import SparcError

CACHE = Path.home() / ".cache" / "sparc-local-train"
DEBS = CACHE / "debs"

# Held out of all training, tuning and thresholds: independent checks of this work (issue 31, item 2).
KEPT_OUT = frozenset("""python3-doc python3-pip sqlite3-doc bash-doc bash debian-reference-en
    debian-reference-common rsync shared-mime-info libtasn1-doc dpkg dpkg-dev""".split())
KEPT_OUT_NAME = re.compile(r"^python.*-doc$|^python3?\.\d+")  # every Python documentation package
KEPT_OUT_PATH = re.compile(r"git-subtree|subtree", re.I)  # git's subtree docs, in any package
# The project's own test sets stay test sets: benchmarks/faq_set.py's 13 FAQ packages, the software
# desk (benchmarks/desk/sources.txt), the science desk and its distractors (benchmarks/desk-science).
TEST_SETS = frozenset("""perl-doc debian-faq libcurl4-doc sed procmail screen cvs sudo ffmpeg-doc
    r-doc-html fetchmail zsh-doc git-doc
    grep gzip libtasn1-doc nodejs python3-pip shared-mime-info util-linux valgrind
    gromacs-data lammps-doc lammps-examples pari-doc r-cran-survival abinit-doc python-mdanalysis-doc
    quantum-espresso-data r-base-core""".split())
TEST_SET_NAME = re.compile(r"^r-cran-")  # the science desk's R vignettes: keep every CRAN package out
# Questions that say nothing about their section: document furniture and API-reference boilerplate.
class KeptOut(SparcError):
    """A package that must stay out of training was about to be used."""


def kept_out(package: str, source: str = "", blocked_sources: frozenset[str] = frozenset()) -> str:
    """Why this package (or its source package) may not be used, "" if it may. blocked_sources:
    the source packages of KEPT_OUT and TEST_SETS (blocked_sources()), whose every binary is out."""
    if source in blocked_sources:
        return f"its source package {source} builds a kept-out or test-set package"
    for name in (package, source or package):
        if name in KEPT_OUT or KEPT_OUT_NAME.search(name):
            return f"{name} is kept out of all training (issue 31)"
        if name in TEST_SETS or TEST_SET_NAME.search(name):
            return f"{name} holds one of the project's test sets"
    return ""


def guard(package: str, source: str = "", blocked_sources: frozenset[str] = frozenset()) -> None:
    reason = kept_out(package, source, blocked_sources)
    if reason:
        raise KeptOut(f"refusing {package}: {reason}", "Drop it from the package list.")


# ------------------------------------------------------------------------------------ packages


@dataclass(frozen=True)
class Package:
    name: str
    source: str
    size: int
    section: str


def available() -> dict[str, Package]:
    """Every package apt knows (from its local lists, `apt-cache dumpavail`)."""
    out: dict[str, Package] = {}
    text = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    for stanza in text.split("\n\n"):
        fields = dict(re.findall(r"^([\w-]+): (.*)$", stanza, re.M))
        name = fields.get("Package")
        if not name or name in out:
            continue
        source = fields.get("Source", name).split()[0]
        out[name] = Package(name, source, int(fields.get("Size", "0")), fields.get("Section", ""))
    return out


def blocked_sources(pkgs: dict[str, Package]) -> frozenset[str]:
    """The source packages of every kept-out and test-set binary, and of every Python doc package."""
    return frozenset(p.source for p in pkgs.values()
                     if p.name in KEPT_OUT or p.name in TEST_SETS or KEPT_OUT_NAME.search(p.name))


def stable_hash(name: str, salt: str = "") -> int:
    return int(hashlib.sha256((salt + name).encode()).hexdigest()[:12], 16)


_NOT_PROSE = re.compile(r"java-doc$|^libghc-|^golang-|^node-|^ruby-.*-doc$|^libjs-|-api-doc$|dbgsym|^lib.*-dev-doc$"
                        r"|-(?:pdf|ps|epub|dvi|info)(?:-\w+)?$|^manpages-|^libreoffice-help-|^installation-guide-(?!amd64)"
                        r"|-(?:ar|ca|cs|da|de|el|es|eu|fi|fr|gl|hu|id|it|ja|ko|nb|nl|pl|pt|pt-br|ro|ru|sk|sv|tr|uk|vi"
                        r"|zh|zh-cn|zh-tw)$")
MAN_SECTIONS = frozenset("utils admin net text editors mail devel web sound graphics video science database "
                         "shells vcs httpd interpreters misc kde gnome x11 games electronics math".split())


def choose(pkgs: dict[str, Package], max_doc: int, max_man: int, doc_from: int = 0) -> list[Package]:
    """Documentation packages (name ends in -doc, or section doc) of at most 30 MB, and programs
    of at most 15 MB (for their man pages and KDE/GNOME handbooks), in a fixed hashed order; never a kept-out or test one.
    doc_from skips the first documentation packages of that order (a build that extends an earlier one)."""
    docs, mans = [], []
    blocked = blocked_sources(pkgs)
    for p in pkgs.values():
        if kept_out(p.name, p.source, blocked) or _NOT_PROSE.search(p.name):
            continue
        if (p.name.endswith(("-doc", "-docs", "-manual", "-faq", "-howto")) or p.section == "doc") \
                and 0 < p.size <= 30_000_000:
            docs.append(p)
        elif p.section in MAN_SECTIONS and not p.name.startswith("lib") and 0 < p.size <= 15_000_000:
            mans.append(p)
    docs.sort(key=lambda p: stable_hash(p.name, "doc"))
    mans.sort(key=lambda p: stable_hash(p.name, "man"))
    return docs[doc_from:max_doc] + mans[:max_man]


def fetch(chosen: list[Package], blocked: frozenset[str], debs: Path = DEBS) -> dict[str, Path]:
    """apt-get download (in batches, then one by one where a batch fails) and dpkg-deb -x into
    debs/root-PKG; a unpacked root is reused. Returns package name -> root."""
    debs.mkdir(parents=True, exist_ok=True)
    for p in chosen:
        guard(p.name, p.source, blocked)
    have = {f.name.split("_")[0] for f in debs.glob("*.deb")}
    todo = [p.name for p in chosen if p.name not in have and not (debs / f"root-{p.name}" / ".done").exists()]
    for i in range(0, len(todo), 40):
        batch = todo[i:i + 40]
        if subprocess.run(["apt-get", "download", *batch], cwd=debs, capture_output=True).returncode:
            for name in batch:
                subprocess.run(["apt-get", "download", name], cwd=debs, capture_output=True)
    roots = {}
    for p in chosen:
        root = debs / f"root-{p.name}"
        if not (root / ".done").exists():
            deb = sorted(debs.glob(f"{p.name}_*.deb"))
            if not deb:
                continue
            root.mkdir(exist_ok=True)
            if subprocess.run(["dpkg-deb", "-x", str(deb[-1]), str(root)], capture_output=True).returncode:
                continue
            (root / ".done").touch()
        roots[p.name] = root
    return roots
