"""Generated check of pyfix-021: det/rank/inverse/solve and Matrix.copy() must leave their inputs intact.

A case draws a small integer matrix and a sequence of calls on it: det(), rank()
(rectangular matrices too), inverse() (recorded as its rows, or "singular" for
SingularMatrixError), solve() with a drawn right-hand side, a copy() that is then changed
(set an entry, swap_rows, scale_row, add_multiple) and the matrix itself. Results are
exact Fractions written with str(); the input matrix is shown after every call, so any
change the bug makes to it shows. Some cases only make calls that leave even the buggy
package's input intact (inverse, solve, row swaps on a copy, det/rank of an upper
triangular matrix with a non-zero diagonal, which elimination does not touch).
"""


def _matrix(rng, rows, cols, kind):
    if kind == "triangular":
        return [
            [
                (rng.choice([1, 2, 3, -1, -2]) if i == j else (rng.randint(-4, 4) if j > i else 0))
                for j in range(cols)
            ]
            for i in range(rows)
        ]
    m = [[rng.randint(-5, 5) for _ in range(cols)] for _ in range(rows)]
    if kind == "singular" and rows >= 2:
        i, k = rng.sample(range(rows), 2)
        f = rng.choice([1, 2, -1])
        m[k] = [f * x for x in m[i]]
    if kind == "zero_pivot":
        m[0][0] = 0
    return m


def _edits(rng, size, harmless):
    edits = []
    for _ in range(rng.randint(1, 3)):
        e = rng.random()
        i, k = rng.sample(range(size), 2)
        if harmless or e < 0.25:
            edits.append(["swap", i, k])  # rearranges the copy's own row list only
        elif e < 0.5:
            edits.append(["set", i, rng.randrange(size), rng.randint(-9, 9)])
        elif e < 0.75:
            edits.append(["scale", i, rng.choice([2, 3, -1, "1/2"])])
        else:
            edits.append(["add", i, k, rng.choice([1, -2, "1/3"])])
    return edits


def cases(rng, n):
    out = []
    for _ in range(n):
        size = rng.randint(2, 4)
        if rng.random() < 0.1:  # rank of a rectangular matrix
            cols = size + rng.choice([-1, 1])
            out.append({"m": _matrix(rng, size, cols, "plain"), "ops": [["rank"], ["show"], ["rank"]]})
            continue
        # harmless cases: calls that even a package with the bug gets right
        harmless = rng.random() < 0.4
        r = rng.random()
        kind = "triangular" if r < 0.25 else "singular" if r < 0.37 else "zero_pivot" if r < 0.55 else "plain"
        m = _matrix(rng, size, size, kind)
        ops = []
        for _ in range(rng.randint(2, 5)):
            q = rng.random()
            if q < 0.3 and (kind == "triangular" or not harmless):
                ops.append(["det"])
            elif q < 0.45 and (kind == "triangular" or not harmless):
                ops.append(["rank"])
            elif q < 0.6:
                ops.append(["inverse"])
            elif q < 0.75:
                ops.append(["solve", [rng.randint(-6, 6) for _ in range(size)]])
            else:
                ops.append(["copy", _edits(rng, size, harmless)])
            ops.append(["show"])
        out.append({"m": m, "ops": ops})
    return out


def call(case):
    from fractions import Fraction

    from linalg import Matrix, SingularMatrixError, det, inverse, rank, solve

    def rows(mat):
        return [[str(x) for x in row] for row in mat.rows]

    a = Matrix(case["m"])
    out = []
    for op in case["ops"]:
        kind = op[0]
        if kind == "det":
            out.append(str(det(a)))
        elif kind == "rank":
            out.append(rank(a))
        elif kind == "inverse":
            try:
                out.append(rows(inverse(a)))
            except SingularMatrixError:
                out.append("singular")
        elif kind == "solve":
            try:
                out.append([str(x) for x in solve(a, op[1])])
            except SingularMatrixError:
                out.append("singular")
        elif kind == "copy":
            b = a.copy()
            for e in op[1]:
                if e[0] == "set":
                    b[e[1], e[2]] = e[3]
                elif e[0] == "swap":
                    b.swap_rows(e[1], e[2])
                elif e[0] == "scale":
                    b.scale_row(e[1], Fraction(e[2]))
                else:
                    b.add_multiple(e[1], e[2], Fraction(e[3]))
            out.append(rows(b))
        else:
            out.append(rows(a))
    return out
