/*
 * status.c — names, sentences and action classes of b10_status_t.
 *
 * Everything here is generated from B10_STATUS_MAP so that a status added to
 * the map cannot be forgotten in one of the tables. Pure code: the daemon
 * links this file too, so it must not touch any libb10 state.
 */
#include <b10/b10.h>

const char *b10_status_name(b10_status_t status)
{
    switch (status) {
#define B10_STATUS_NAME(name, value, action, text) \
    case B10_##name:                               \
        return "B10_" #name;
        B10_STATUS_MAP(B10_STATUS_NAME)
#undef B10_STATUS_NAME
    }
    return "B10_UNKNOWN";
}

const char *b10_status_str(b10_status_t status)
{
    switch (status) {
#define B10_STATUS_STR(name, value, action, text) \
    case B10_##name:                              \
        return text;
        B10_STATUS_MAP(B10_STATUS_STR)
#undef B10_STATUS_STR
    }
    return "unknown status";
}

/*
 * A value outside the map came from a newer peer or from garbage; neither
 * can be fixed by the caller's request, and the connection that carried it
 * is not to be trusted, so the answer is to reopen it.
 */
b10_action_t b10_status_action(b10_status_t status)
{
    switch (status) {
#define B10_STATUS_ACTION(name, value, action, text) \
    case B10_##name:                                 \
        return B10_ACTION_##action;
        B10_STATUS_MAP(B10_STATUS_ACTION)
#undef B10_STATUS_ACTION
    }
    return B10_ACTION_REOPEN;
}
