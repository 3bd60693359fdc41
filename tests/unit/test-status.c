/*
 * test-status.c — client/status.c and the .proto mirror of b10_status_t;
 * daemon/base/status.c, an errno in the status a room returns.
 *
 * B10_STATUS_MAP is the one list; the name, sentence and action tables are
 * generated from it, and proto/b10.proto's enum Status must carry the same
 * names with the same values, no more and no fewer.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <b10/b10.h>

#include "b10.pb-c.h"
#include "status.h"

struct entry {
    b10_status_t value;
    const char *name;        /* "B10_ERR_DEADLINE" */
    const char *bare;        /* "ERR_DEADLINE", as in the .proto */
    b10_action_t action;
    const char *text;
    int proto_value;         /* the generated protobuf-c enum constant of that name */
};

static const struct entry map[] = {
#define ENTRY(name, value, action, text) \
    { B10_##name, "B10_" #name, #name, B10_ACTION_##action, text, (int)B10__STATUS__##name },
    B10_STATUS_MAP(ENTRY)
#undef ENTRY
};
#define NMAP (sizeof(map) / sizeof(map[0]))

static const struct entry *map_find(int value)
{
    for (size_t i = 0; i < NMAP; i++)
        if ((int)map[i].value == value)
            return &map[i];
    return NULL;
}

static void test_map_values_distinct(void **state)
{
    assert_true(NMAP > 10);
    for (size_t i = 0; i < NMAP; i++)
        for (size_t j = i + 1; j < NMAP; j++)
            if (map[i].value == map[j].value)
                fail_msg("%s and %s share the value %d", map[i].name, map[j].name,
                         (int)map[i].value);
    /* OK is 0: callers test `if (status)`. */
    assert_int_equal(B10_OK, 0);
    assert_string_equal(map[0].name, "B10_OK");
}

static void test_names_strings_actions(void **state)
{
    for (size_t i = 0; i < NMAP; i++) {
        const struct entry *e = &map[i];
        const char *name = b10_status_name(e->value);
        const char *str = b10_status_str(e->value);

        assert_non_null(name);
        assert_string_equal(name, e->name);
        assert_true(strncmp(name, "B10_", 4) == 0 && strlen(name) > 4);
        assert_non_null(str);
        assert_true(strlen(str) > 0);
        assert_string_equal(str, e->text);
        assert_int_equal(b10_status_action(e->value), e->action);
        /* Sentences and names are distinct, so a log line tells statuses apart. */
        for (size_t j = 0; j < i; j++) {
            assert_string_not_equal(str, b10_status_str(map[j].value));
            assert_string_not_equal(name, b10_status_name(map[j].value));
        }
    }
    /* The grouping the header promises, spot-checked by hand. */
    assert_int_equal(b10_status_action(B10_OK), B10_ACTION_NONE);
    assert_int_equal(b10_status_action(B10_IN_PROGRESS), B10_ACTION_NONE);
    assert_int_equal(b10_status_action(B10_ERR_INVALID_ARG), B10_ACTION_FIX);
    assert_int_equal(b10_status_action(B10_ERR_DEADLINE), B10_ACTION_RETRY);
    assert_int_equal(b10_status_action(B10_ERR_PEER_LOST), B10_ACTION_PEER);
    assert_int_equal(b10_status_action(B10_ERR_DAEMON_LOST), B10_ACTION_REOPEN);
    assert_int_equal(b10_status_action(B10_ERR_DAEMON_EXITED), B10_ACTION_REOPEN);
    assert_string_equal(b10_status_name(B10_ERR_TAG_COLLISION), "B10_ERR_TAG_COLLISION");
    assert_string_equal(b10_status_str(B10_ERR_DEADLINE), "transfer deadline expired");
}

static void test_unknown_values(void **state)
{
    const int unknown[] = { -1, 2, 9, 21, 29, 39, 49, 53, 69, 75, 89, 93, 1000, 0x7fffffff };

    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        assert_null(map_find(unknown[i]));
        b10_status_t s = (b10_status_t)unknown[i];
        assert_string_equal(b10_status_name(s), "B10_UNKNOWN");
        assert_string_equal(b10_status_str(s), "unknown status");
        assert_int_equal(b10_status_action(s), B10_ACTION_REOPEN);
    }
}

static void test_proto_mirrors_header(void **state)
{
    const ProtobufCEnumDescriptor *desc = &b10__status__descriptor;

    /* Every header status is in the .proto under the same name, with the same value. */
    for (size_t i = 0; i < NMAP; i++) {
        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value_by_name(desc, map[i].bare);
        if (v == NULL)
            fail_msg("%s is missing from proto/b10.proto's enum Status", map[i].bare);
        if (v->value != (int)map[i].value)
            fail_msg("%s is %d in the header and %d in the .proto", map[i].bare,
                     (int)map[i].value, v->value);
        assert_int_equal(map[i].proto_value, (int)map[i].value);
        /* And the value resolves back to that name. */
        const ProtobufCEnumValue *back = protobuf_c_enum_descriptor_get_value(desc, v->value);
        assert_non_null(back);
        assert_string_equal(back->name, map[i].bare);
    }

    /* Every .proto value is in the header under the same name. */
    for (unsigned i = 0; i < desc->n_values; i++) {
        const ProtobufCEnumValue *v = &desc->values[i];
        const struct entry *e = map_find(v->value);
        if (e == NULL)
            fail_msg(".proto status %s = %d is not in B10_STATUS_MAP", v->name, v->value);
        assert_string_equal(e->bare, v->name);
    }
    assert_int_equal(desc->n_values, NMAP);
    assert_null(protobuf_c_enum_descriptor_get_value_by_name(desc, "NO_SUCH_STATUS"));
}

/* An errno says what the caller must do; one the map does not know is an i/o error. */
static void test_status_from_errno(void **state)
{
    static const struct {
        int err;
        b10_status_t want;
    } cases[] = {
        { ENOMEM, B10_ERR_NO_MEMORY },   { EMFILE, B10_ERR_NO_MEMORY },
        { ENFILE, B10_ERR_NO_MEMORY },   { EACCES, B10_ERR_PERMISSION },
        { EPERM, B10_ERR_PERMISSION },   { EROFS, B10_ERR_PERMISSION },
        { ENOENT, B10_ERR_NOT_FOUND },   { ENOTDIR, B10_ERR_NOT_FOUND },
        { EEXIST, B10_ERR_EXISTS },      { EADDRINUSE, B10_ERR_EXISTS },
        { EINVAL, B10_ERR_INVALID_ARG }, { ENAMETOOLONG, B10_ERR_INVALID_ARG },
        { EADDRNOTAVAIL, B10_ERR_INVALID_ARG }, { ENOTSUP, B10_ERR_UNSUPPORTED },
        { EIO, B10_ERR_IO },             { ECONNRESET, B10_ERR_IO },
        { 0, B10_ERR_IO },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(status_from_errno(cases[i].err), cases[i].want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_values_distinct),
        cmocka_unit_test(test_names_strings_actions),
        cmocka_unit_test(test_unknown_values),
        cmocka_unit_test(test_proto_mirrors_header),
        cmocka_unit_test(test_status_from_errno),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
