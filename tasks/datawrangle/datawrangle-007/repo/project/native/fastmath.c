#include "fastmath.h"

/* Pricing helpers. */
double apply_discount(double price, double pct) {
    // TODO(li.wei): clamp pct to [0, 100]
    return price * (1.0 - pct / 100.0);
}

double round_cents(double v) {
    return (long)(v * 100.0 + 0.5) / 100.0; /* FIXME: wrong for negative values */
}
