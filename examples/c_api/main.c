/* attngen from plain C: the tutorial's scaled dot-product attention example, and a small MHA
 * forward with a causal mask. Exits non-zero when a result is off. */
#include <attngen/attngen.h>

#include <math.h>
#include <stdio.h>

static int close_to(float got, float expected) {
    return fabsf(got - expected) <= 1e-4f * (1 + fabsf(expected));
}

int main(void) {
    const float keys[4 * 3] = {10, 0, 0, 0, 10, 0, 0, 0, 10, 0, 0, 10};
    const float values[4 * 2] = {1, 0, 10, 0, 100, 5, 1000, 6};
    const float query[3] = {0, 0, 10};
    float out[2], weights[4];
    attngen_status s =
        attngen_sdpa(1, 1, 1, 4, 3, 2, query, keys, values, NULL, 0.0f, out, weights);
    if (s != ATTNGEN_OK) {
        fprintf(stderr, "attngen_sdpa: %s: %s\n", attngen_status_string(s), attngen_last_error());
        return 1;
    }
    printf("weights [%.3f %.3f %.3f %.3f] output [%.3f %.3f]\n", weights[0], weights[1], weights[2],
           weights[3], out[0], out[1]);
    if (!close_to(out[0], 550.0f) || !close_to(out[1], 5.5f) || !close_to(weights[2], 0.5f)) {
        fprintf(stderr, "unexpected result\n");
        return 1;
    }

    /* A bad request is reported, not crashed on: d_model 10 is not divisible by 3 heads. */
    attngen_mha_config bad = {10, 3, 0, 0, 0, 1, ATTNGEN_DEVICE_CPU};
    attngen_mha *m = NULL;
    s = attngen_mha_create(&bad, &m);
    printf("create(d_model 10, 3 heads): %s: %s\n", attngen_status_string(s), attngen_last_error());
    if (s != ATTNGEN_ERROR_SHAPE || m != NULL) return 1;

    /* Identity projections, 1 head of 3: the MHA output equals the SDPA output. */
    attngen_mha_config cfg = {3, 1, 0, 2, 0, 0, ATTNGEN_DEVICE_CPU};
    if (attngen_mha_create(&cfg, &m) != ATTNGEN_OK) return 1;
    const float eye3[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    const float wv[3 * 2] = {1, 0, 0, 1, 0, 0};
    s = attngen_mha_set_weights(m, eye3, eye3, wv, eye3, NULL, NULL, NULL, NULL);
    float mha_out[3];
    const float scaled_query[3] = {0, 0, 10.0f};
    if (s == ATTNGEN_OK) {
        s = attngen_mha_forward(m, 1, 1, 4, scaled_query, keys, values, NULL, mha_out, NULL);
    }
    attngen_mha_destroy(m);
    if (s != ATTNGEN_OK) {
        fprintf(stderr, "mha: %s: %s\n", attngen_status_string(s), attngen_last_error());
        return 1;
    }
    printf("mha output [%.3f %.3f %.3f]\n", mha_out[0], mha_out[1], mha_out[2]);
    if (!close_to(mha_out[0], 550.0f) || !close_to(mha_out[1], 5.5f) || !close_to(mha_out[2], 0)) {
        return 1;
    }
    printf("attngen %s from C: ok\n", attngen_version());
    return 0;
}
