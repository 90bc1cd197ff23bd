#ifndef FASTMATH_H
#define FASTMATH_H
double apply_discount(double price, double pct);
double round_cents(double v); // TODO: document rounding mode
#endif
