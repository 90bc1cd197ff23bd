"""Render a small subset of Markdown to HTML."""

import html
import re

_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[([^\]]+)\]\((.*)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"\*(.+?)\*")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*$")
_PLACEHOLDER = re.compile(r"\x00(\d+)\x00")


def _link(match):
    text, url = match.group(1), match.group(2).strip()
    return f'<a href="{url.replace(chr(34), "&quot;")}">{text}</a>'


def render_inline(text):
    """Render inline Markdown (code, links, bold, italic) in *text*."""
    code_spans = []

    def stash(match):
        code_spans.append(f"<code>{match.group(1)}</code>")
        return f"\x00{len(code_spans) - 1}\x00"

    out = html.escape(text, quote=False)
    out = _CODE.sub(stash, out)
    out = _LINK.sub(_link, out)
    out = _BOLD.sub(r"<strong>\1</strong>", out)
    out = _ITALIC.sub(r"<em>\1</em>", out)
    return _PLACEHOLDER.sub(lambda m: code_spans[int(m.group(1))], out)


def render(text):
    """Render a whole document: headings and paragraphs."""
    blocks = re.split(r"\n\s*\n", text.strip())
    html_blocks = []
    for block in blocks:
        block = block.strip()
        if not block:
            continue
        heading = _HEADING.match(block) if "\n" not in block else None
        if heading:
            level = len(heading.group(1))
            html_blocks.append(f"<h{level}>{render_inline(heading.group(2))}</h{level}>")
        else:
            lines = " ".join(line.strip() for line in block.splitlines())
            html_blocks.append(f"<p>{render_inline(lines)}</p>")
    return "\n".join(html_blocks)
