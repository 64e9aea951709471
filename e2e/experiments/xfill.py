"""Position-coded test texts of an exact size, and a cut analyser (stdlib only).

make_text(tag, n, unit, alpha) -> "BEGIN-<tag>|" + filler + "|END-<tag>", exactly n units long:
  unit  "chars" (code points), "utf16" (UTF-16 code units, what JS .length counts), "bytes" (UTF-8),
        or "fill": exactly n filler characters (the BEGIN/END tags come on top)
  alpha "ascii"  filler = "000000012,000000022,..." (each 10-char chunk names the offset of
                 the char after it, so a cut point can be read off the text)
        "lines"  filler = 100-char lines "<offset, 9 digits>----...----\n" (offset of the next line)
        "cjk3"   filler char i = U+4E00 + i  (3 UTF-8 bytes, 1 UTF-16 unit each)
        "emoji4" filler char i = U+20000 + i (CJK Ext. B: 4 UTF-8 bytes, 2 UTF-16 units each)
  A remainder smaller than one filler char is padded with ".".
kept(orig, seen) -> (head, tail): how many leading / trailing code points of orig occur
  contiguously in seen (head anchored at orig's start, tail at its end).
"""


def size(s, unit):
    if unit == "chars":
        return len(s)
    if unit == "utf16":
        return len(s.encode("utf-16-le")) // 2
    if unit == "bytes":
        return len(s.encode("utf-8"))
    raise ValueError(unit)


def make_text(tag, n, unit="chars", alpha="ascii"):
    head, tail = "BEGIN-%s|" % tag, "|END-%s" % tag
    if unit == "fill":
        if alpha == "ascii":
            f = "".join("%09d," % (len(head) + k + 10) for k in range(0, n - n % 10, 10))
            return head + f + "." * (n % 10) + tail
        base = 0x4E00 if alpha == "cjk3" else 0x20000
        return head + "".join(chr(base + i) for i in range(n)) + tail
    room = n - size(head, unit) - size(tail, unit)
    if room < 0:
        raise ValueError("n too small")
    parts, used, i = [], 0, 0
    if alpha == "lines":
        while room - used >= 100:
            parts.append("%09d" % (len(head) + used + 100) + "-" * 90 + "\n")
            used += 100
    elif alpha == "ascii":
        while room - used >= 10:
            parts.append("%09d," % (len(head) + used + 10))
            used += 10
    else:
        base = 0x4E00 if alpha == "cjk3" else 0x20000
        cost = size(chr(base), unit)
        while room - used >= cost:
            parts.append(chr(base + i))
            used += cost
            i += 1
    parts.append("." * (room - used))
    s = head + "".join(parts) + tail
    assert size(s, unit) == n, (size(s, unit), n)
    return s


def kept(orig, seen):
    head = 0
    k = seen.find(orig[:16])
    if k >= 0:
        while head < len(orig) and k + head < len(seen) and seen[k + head] == orig[head]:
            head += 1
    tail = 0
    k = seen.rfind(orig[-16:])
    if k >= 0:
        end = k + 16
        while tail < len(orig) and end - tail - 1 >= 0 and seen[end - tail - 1] == orig[-tail - 1]:
            tail += 1
    return head, tail


def describe(s):
    return "%d chars / %d UTF-16 units / %d UTF-8 bytes" % (
        size(s, "chars"), size(s, "utf16"), size(s, "bytes"))
