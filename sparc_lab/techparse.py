"""Documentation files to titled sections, the raw material of the technical training pairs (issue 31).

A document becomes a list of Sections: a heading (an HTML h1-h6, a Markdown/reStructuredText/info
heading, a plain-text FAQ question, a man page section, an option or term of a definition list)
and the prose paragraphs it heads. Text before any heading is a Section with no heading: it goes
into the corpus but asks nothing. Code (HTML <pre>, Markdown fences, reST literal blocks, man
page no-fill blocks, paragraphs mostly of symbols) is left out: the segmenter is for prose.

Readers here are deliberately simple and fast: they run over thousands of files a build.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser

from sparc_local.ingest.readers import norm_text

KINDS = ("faq", "howto", "heading", "option", "term")


@dataclass(frozen=True)
class Section:
    heading: str  # raw heading text, "" for text before the first heading
    kind: str  # one of KINDS ("" when heading is "")
    paragraphs: tuple[str, ...]  # prose paragraphs, normalised


def heading_kind(text: str, definition: bool = False) -> str:
    """faq: a question; option: a command-line option or flag; term: a definition list's term."""
    text = re.sub(r"^\s*(?:#+\s*)?(?:[A-Z]?\d+(?:\.\d+)*[.:)]?|[A-Z][.)])\s+", "", text).strip()
    if re.match(r"^Q\d*[:.)]\s", text) or (text.endswith("?") and not re.search(r"\?\w|\s\?$", text[:-1] + " ")
                                             and len(text.split()) >= 2 and text[0].isalpha()):
        return "faq"
    if re.match(r"^(?:How (?:to|do|can|does)|Howto)\b", text, re.I):
        return "howto"
    if re.match(r"^[‘'`\"]?[-+][-+\w]", text):
        return "option"
    return "term" if definition else "heading"


_CODE_LINE = re.compile(r"^\s*(?:\$|#|%|>>>|\w+\s*[:+-]?=|[{}()\[\];]|//|/\*|\*/)")


def looks_code(text: str) -> bool:
    """A paragraph of code, a table or a path list rather than prose: few letters, or few words."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return True
    letters = sum(c.isalpha() for c in chars)
    if letters < 0.6 * len(chars):
        return True
    words = text.split()
    return len(words) >= 4 and sum(w.isalpha() for w in words) < 0.4 * len(words)


class _Builder:
    """Collects sections: start() a heading, add() a paragraph to the open one."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.heading, self.kind, self.paras = "", "", []

    def start(self, heading: str, kind: str) -> None:
        self.close()
        self.heading, self.kind = norm_text(heading), kind

    def add(self, text: str) -> None:
        text = norm_text(text)
        if text and not looks_code(text):
            self.paras.append(text)

    def close(self) -> list[Section]:
        if self.heading or self.paras:
            self.sections.append(Section(self.heading, self.kind if self.heading else "", tuple(self.paras)))
        self.heading, self.kind, self.paras = "", "", []
        return self.sections


# ------------------------------------------------------------------------------------------ HTML

_H = frozenset("h1 h2 h3 h4 h5 h6".split())
_HTML_BLOCKS = _H | frozenset(
    "p div li ul ol dl dt dd br hr tr td th table thead tbody caption section article blockquote pre "
    "figure figcaption body title header footer nav aside main".split())
_SKIP = frozenset("script style head noscript template svg nav aside".split())
_SKIP_CLASSES = frozenset(
    "nav navbar navheader navfooter navigation breadcrumb breadcrumbs sidebar sphinxsidebar "
    "sphinxsidebarwrapper related footer toc toctree-wrapper contents headerlink topnav bottomnav "
    "menu navbar-nav header-nav".split())
_PERMALINK = re.compile(r"\s*[¶#§]\s*$")


# DocBook (KDE handbooks) and Mallard (GNOME help) read as HTML: each tag mapped to its HTML role.
XML_TAGS = {"title": "h2", "question": "question", "para": "p", "simpara": "p", "programlisting": "pre",
            "screen": "pre", "synopsis": "pre", "term": "dt", "listitem": "dd", "item": "li",
            "info": "script", "bookinfo": "script", "articleinfo": "script", "indexterm": "script",
            "refmeta": "script", "chapterinfo": "script", "sectioninfo": "script", "legalnotice": "script", "revhistory": "script", "desc": "script",
            "authorgroup": "script", "keywordset": "script", "abstract": "script", "example": "pre"}
_PRIVATE = re.compile("[\ue000-\uf8ff\u200b]")


class _Html(HTMLParser):
    def __init__(self, tags: dict[str, str] | None = None) -> None:
        super().__init__(convert_charrefs=True)
        self.tags = tags or {}
        self.b = _Builder()
        self.buf: list[str] = []
        self.where = ""  # "h", "dt", "pre" or ""
        self.skip_depth: list[str] = []  # tags of skipped regions still open
        self.in_dd = 0
        self.after_dt = False  # the open section is a dt's: text outside a dd leaves it

    def flush(self) -> None:
        text = norm_text(_PRIVATE.sub("", "".join(self.buf)))
        self.buf = []
        if not text:
            return
        if self.where in ("h", "dt", "question"):
            text = _PERMALINK.sub("", text)
            if self.where == "question":
                self.b.start(text, "faq")
                self.after_dt = False
            elif self.where == "dt":
                self.b.start(text, heading_kind(text, definition=True))
                self.after_dt = True
            else:
                self.b.start(text, heading_kind(text))
                self.after_dt = False
        elif self.where != "pre":
            if self.after_dt and not self.in_dd:
                self.b.start("", "")
                self.after_dt = False
            self.b.add(text)

    def handle_starttag(self, tag: str, attrs) -> None:
        tag = self.tags.get(tag, tag)
        if self.skip_depth:
            if tag == self.skip_depth[-1]:
                self.skip_depth.append(tag)
            return
        classes = " ".join(v or "" for k, v in attrs if k in ("class", "id", "role")).lower().split()
        if tag in _SKIP or (tag in ("div", "ul", "table", "section", "header", "footer")
                            and not _SKIP_CLASSES.isdisjoint(classes)):
            self.flush()
            self.skip_depth.append(tag)
            return
        if tag in _HTML_BLOCKS:
            self.flush()
        if tag in _H:
            self.where = "h"
        elif tag == "question":
            self.flush()
            self.where = "question"
        elif tag == "dt":
            self.where = "dt"
        elif tag == "pre":
            self.where = "pre"
        elif tag == "dd":
            self.in_dd += 1

    def handle_endtag(self, tag: str) -> None:
        tag = self.tags.get(tag, tag)
        if self.skip_depth:
            if tag == self.skip_depth[-1]:
                self.skip_depth.pop()
            return
        if tag in _HTML_BLOCKS:
            self.flush()
        if tag == "question":
            self.flush()
        if tag in _H or tag in ("dt", "pre", "question"):
            self.where = ""
        elif tag == "dd":
            self.in_dd = max(0, self.in_dd - 1)

    def handle_startendtag(self, tag: str, attrs) -> None:
        if tag in ("br", "hr") and not self.skip_depth:
            self.flush()

    def handle_data(self, data: str) -> None:
        if not self.skip_depth:
            self.buf.append(data)

    def unknown_decl(self, data: str) -> None:
        if data.startswith("CDATA[") and not self.skip_depth and self.where != "pre":
            self.buf.append(data[6:])


_ENTITY = re.compile(r"&([A-Za-z][\w.-]*);")


def xml_sections(text: str) -> list[Section]:
    """A DocBook or Mallard document; an entity it defines elsewhere (&kappname;) reads as its name."""
    text = re.sub(r"<!DOCTYPE[^\[>]*(\[.*?\])?\s*>", "", text, count=1, flags=re.S)
    text = _ENTITY.sub(lambda m: m.group(0) if m.group(1) in ("amp", "lt", "gt", "quot", "apos", "nbsp")
                       else m.group(1), text)
    return html_sections(text, XML_TAGS)


def html_sections(text: str, tags: dict[str, str] | None = None) -> list[Section]:
    parser = _Html(tags)
    parser.feed(text)
    parser.close()
    parser.flush()
    return parser.b.close()


# ------------------------------------------------------------------------ plain text, Markdown, reST, info

_UNDERLINE = re.compile(r"^\s*([=\-~*^#+_.`'\"])\1{2,}\s*$")
_MD_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_NUMBERED = re.compile(r"^\s{0,4}(?:\d+(?:\.\d+)*\.?|[A-Z]\.|\d+\))\s+\S")
_QMARK = re.compile(r"^\s*(?:Q\d*[:.)]|Question\s*\d*[:.])\s*", re.I)
_ANSWER = re.compile(r"^\s*(?:A\d*[:.)]|Answer\s*\d*[:.])\s+", re.I)
_RST_DIRECTIVE = re.compile(r"^\s*\.\.\s")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_EMPH = re.compile(r"(\*\*|__|\*|`)(\S(?:.*?\S)?)\1")
_BULLET = re.compile(r"^\s*(?:[-*+•o]|\d+[.)])\s+")
_INFO_HEADER = re.compile(r"^File: \S+,\s+Node:")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _paragraphs(lines: list[str], markup: str) -> list[tuple[str, list[str]]]:
    """Blank-line paragraphs, each tagged "code" (fences, reST literal blocks) or "text"; a setext or
    reST underline and a Markdown '#' line end up as one-line paragraphs tagged "h"."""
    out: list[tuple[str, list[str]]] = []
    para: list[str] = []
    fence = False
    literal_indent = -1  # reST: the paragraph before ended with "::", indented lines after are code

    def flush(tag: str = "text") -> None:
        if para:
            out.append((tag, para[:]))
            para.clear()

    for line in lines:
        line = line.expandtabs(8).rstrip()
        if markup == "md" and _FENCE.match(line):
            flush("code" if fence else "text")
            fence = not fence
            continue
        if fence:
            para.append(line)
            continue
        if literal_indent >= 0:
            if not line.strip() or _indent(line) > literal_indent:
                continue
            literal_indent = -1
        if not line.strip():
            if para and markup == "rst" and para[-1].rstrip().endswith("::"):
                literal_indent = min(_indent(x) for x in para)
            flush()
            continue
        if markup == "md" and _MD_HEADING.match(line):
            flush()
            out.append(("h", [_MD_HEADING.match(line).group(2)]))
            continue
        if markup != "md" and _UNDERLINE.match(line):
            if len(para) == 1 and not _UNDERLINE.match(para[0]):
                out.append(("h", para[:]))
                para.clear()
            elif not para:
                pass  # an overline, or a rule
            else:
                flush()
            continue
        if markup == "md" and para and re.match(r"^\s{0,3}(=+|-+)\s*$", line) and len(para) == 1:
            out.append(("h", para[:]))
            para.clear()
            continue
        if markup == "rst" and _RST_DIRECTIVE.match(line):
            flush()
            literal_indent = _indent(line)
            continue
        para.append(line)
    flush("code" if fence else "text")
    return out


def _inline(line: str, markup: str) -> str:
    line = _ANSWER.sub("", line)
    if markup == "md":
        line = _MD_EMPH.sub(r"\2", _MD_LINK.sub(r"\1", line.lstrip("> ")))
    elif markup == "rst":
        line = re.sub(r"`([^`<]*?)\s*(?:<[^>]*>)?`_*", r"\1", line).replace("``", "")
        line = re.sub(r":\w+:", "", line)
    return line


def _is_heading_line(para: list[str]) -> bool:
    """A plain-text heading: a short question, a numbered title, or a short ALL-CAPS line."""
    text = " ".join(x.strip() for x in para)
    if len(para) <= 3 and text.endswith("?") and len(text) <= 200 and not _BULLET.match(para[0]):
        return True
    if _QMARK.match(para[0]) and len(text) <= 300:
        return True
    if len(para) != 1 or len(text) > 80 or text.endswith((".", ",", ":", ";")):
        return False
    if _NUMBERED.match(para[0]) and text[0:1].isdigit() or _NUMBERED.match(para[0]) and len(text) < 60:
        return sum(c.isalpha() for c in text) >= 3
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 3 and all(c.isupper() for c in letters) and _indent(para[0]) < 8


def _definition(para: list[str]) -> tuple[str, list[str]] | None:
    """A term or option line(s) above an indented description (info, text option lists)."""
    first = _indent(para[0])
    for k in range(1, min(len(para), 4)):
        if _indent(para[k]) >= first + 3:
            head = para[:k]
            if all(_indent(x) == first and len(x.strip()) <= 80 for x in head):
                return ", ".join(x.strip() for x in head), para[k:]
            return None
    return None


def text_sections(text: str, markup: str = "txt") -> list[Section]:
    """markup: "txt" (FAQs, READMEs, HOWTOs), "md", "rst" or "info"."""
    lines = text.replace("\r\n", "\n").replace("\u00a0", " ").split("\n")
    if markup == "info":
        lines = [x for x in lines if not _INFO_HEADER.match(x) and x != "\x1f"]
    b = _Builder()
    in_menu = False
    for tag, para in _paragraphs(lines, "txt" if markup == "info" else markup):
        if tag == "code":
            continue
        if tag == "h":
            heading = _inline(para[0].strip(), markup)
            b.start(heading, heading_kind(heading))
            continue
        if markup == "info":
            if para[0].startswith("* Menu:") or all(x.startswith("* ") or _indent(x) > 20 for x in para):
                in_menu = para[0].startswith("* Menu:") or in_menu
                continue
            in_menu = False
        if markup in ("txt", "info") and _is_heading_line(para):
            heading = _QMARK.sub("", " ".join(x.strip() for x in para))
            b.start(heading, heading_kind(heading))
            continue
        if markup in ("txt", "info", "rst") and len(para) > 1:
            found = _definition(para)
            if found:
                term, body = found
                b.start(term, heading_kind(term, definition=True))
                b.add(" ".join(_inline(x.strip(), markup) for x in body))
                continue
        prose = " ".join(_inline(_BULLET.sub("", x).strip(), markup) for x in para)
        b.add(prose)
    return b.close()


# ------------------------------------------------------------------------------------------ man pages

MAN_RENDER = ["groff", "-t", "-man", "-Tutf8", "-P-cbou", "-rLL=2000n", "-rHY=0"]
_TAG_INLINE = re.compile(r"^ {7}(\S{1,5}) {2,}(?=\S)")
_PAGE_HEADER = re.compile(r"^\S.*\S {5,}\S.*\S {5,}\S.*$")


def render_man(source: bytes) -> str:
    """A man page's roff source rendered to plain text, one line per filled paragraph."""
    done = subprocess.run(MAN_RENDER, input=source, capture_output=True, timeout=60)
    return done.stdout.decode("utf-8", errors="replace")


def man_sections(rendered: str) -> list[Section]:
    """Sections of a rendered man page by indentation: column 0 a section (.SH), 3 a subsection
    (.SS), 7 the body; a body line with deeper lines under it is a tag (.TP: an option or term) and
    they are its description. Runs of same-indent lines are no-fill text (code, tables): left out."""
    lines = [x.expandtabs(8).rstrip() for x in rendered.split("\n")]
    groups: list[list[str]] = []
    for line in lines:
        if not line.strip():
            groups.append([])
        elif _PAGE_HEADER.match(line):
            continue
        else:
            if not groups:
                groups.append([])
            groups[-1].append(line)
    b = _Builder()
    tag_indent = -1  # the open section is a tag at this indent
    for group in (g for g in groups if g):
        i = 0
        while i < len(group):
            line, ind = group[i], _indent(group[i])
            if ind < 7:
                b.start(line.strip(), heading_kind(line.strip()))
                tag_indent = -1
                i += 1
                continue
            if tag_indent >= 0 and ind <= tag_indent:
                b.start("", "")
                tag_indent = -1
            inline = _TAG_INLINE.match(line)
            if inline:
                tag = inline.group(1)
                b.start(tag, heading_kind(tag, definition=True))
                tag_indent = ind
                group = group[:i] + [" " * 14 + line[inline.end():]] + group[i + 1:]
                continue
            if i + 1 < len(group) and _indent(group[i + 1]) > ind and len(line.strip()) <= 100:
                b.start(line.strip(), heading_kind(line.strip(), definition=True))
                tag_indent = ind
                i += 1
                continue
            j = i + 1
            while j < len(group) and _indent(group[j]) == ind:
                j += 1
            if j - i == 1:
                b.add(line)
            i = j
    return b.close()
