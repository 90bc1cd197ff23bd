"""Longest-common-subsequence diff of two sequences of lines."""


def opcodes(a, b):
    """Return difflib-style opcodes ``(tag, i1, i2, j1, j2)`` turning *a* into *b*."""
    n, m = len(a), len(b)
    # lcs[i][j] = length of the LCS of a[i:] and b[j:]
    lcs = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if a[i] == b[j]:
                lcs[i][j] = lcs[i + 1][j + 1] + 1
            else:
                lcs[i][j] = max(lcs[i + 1][j], lcs[i][j + 1])

    codes = []
    i = j = 0
    start_i, start_j = 0, 0

    def flush_change(i, j):
        if i > start_i and j > start_j:
            codes.append(("replace", start_i, i, start_j, j))
        elif i > start_i:
            codes.append(("delete", start_i, i, start_j, j))
        elif j > start_j:
            codes.append(("insert", start_i, i, start_j, j))

    while i < n or j < m:
        if i < n and j < m and a[i] == b[j]:
            flush_change(i, j)
            k = 0
            while i + k < n and j + k < m and a[i + k] == b[j + k]:
                k += 1
            codes.append(("equal", i, i + k, j, j + k))
            i, j = i + k, j + k
            start_i, start_j = i, j
        elif j >= m or (i < n and lcs[i + 1][j] >= lcs[i][j + 1]):
            i += 1
        else:
            j += 1
    flush_change(i, j)
    return codes
