#pragma once
/* Central-difference star stencils of the Laplacian, orders 2, 4, 6 and 8 (radius 1 to 4).
 *
 * Along one axis of spacing h, the second derivative at a cell is approximated by
 *
 *   u''(x) ~ (1 / h^2) [ w_0 u(x) + sum_{m=1..r} w_m (u(x - m h) + u(x + m h)) ],   r = p / 2,
 *
 * exact for polynomials of degree p + 1 (error O(h^p)); the Laplacian sums this over the axes.
 * The weights (w_0; w_1 .. w_r) are the standard ones:
 *
 *   p = 2: -2;       1
 *   p = 4: -5/2;     4/3, -1/12
 *   p = 6: -49/18;   3/2, -3/20, 1/90
 *   p = 8: -205/72;  8/5, -1/5, 8/315, -1/560
 *
 * Applied to a Fourier mode e^{i theta j} the 1D operator multiplies it by the symbol
 *
 *   sigma_p(theta) = w_0 + 2 sum_m w_m cos(m theta)   (<= 0, decreasing on [0, pi]),
 *
 * so its spectrum lies in [sigma_p(pi), 0] and the spectral bound is beta_p = -sigma_p(pi):
 * 4, 16/3, 272/45 and 2048/315. Pure arithmetic, no state. */

#define STENCIL_MAX_RADIUS 4

/* 1 if `order` is one of 2, 4, 6, 8. */
int stencil_order_supported(int order);

/* The radius r = order / 2 and the weights w[0..r] (w[r+1..4] = 0) as doubles, each the
 * correctly rounded value of the fraction above. Call only with a supported order. */
void stencil_weights(int order, double w[STENCIL_MAX_RADIUS + 1]);

/* sigma_p(theta), evaluated in double. */
double stencil_symbol(int order, double theta);

/* beta_p = max over theta of |sigma_p(theta)| = -sigma_p(pi), evaluated from the weights
 * (|w_0| + 2 sum_m |w_m|, since the signs of w_m alternate). */
double stencil_spectral_bound(int order);

/* beta_p as an exact fraction for messages: "4", "16/3", "272/45" or "2048/315". */
const char *stencil_bound_text(int order);
