/* optdoc.c — see optdoc.h. */
#include "optdoc.h"

#include <ctype.h>
#include <string.h>

/* The man page's source lines are filled to this width where words allow. */
#define OPTDOC_MAN_WIDTH 79

/* A short option is one whose getopt value is a character. */
static bool optdoc_short(const struct optdoc *o)
{
    return o->id > 0 && o->id < 256 && isalnum(o->id);
}

void optdoc_help(FILE *f, const struct optdoc *o, int column)
{
    char lead[128];
    int n;

    if (o->help == NULL)
        return;
    if (o->name == NULL) {
        fprintf(f, "\n%s\n", o->help);
        return;
    }
    if (optdoc_short(o))
        n = snprintf(lead, sizeof(lead), "  -%c, --%s", o->id, o->name);
    else
        n = snprintf(lead, sizeof(lead), "      --%s", o->name);
    if (o->has_arg == required_argument)
        n += snprintf(lead + n, sizeof(lead) - (size_t)n, " %s", o->arg);
    else if (o->has_arg == optional_argument)
        n += snprintf(lead + n, sizeof(lead) - (size_t)n, "[=%s]", o->arg);
    fprintf(f, "%s%*s", lead, n < column ? column - n : 2, "");
    for (const char *c = o->help; *c != '\0'; c++)
        if (*c == '\n')
            fprintf(f, "\n%*s", column, "");
        else
            fputc(*c, f);
    fputc('\n', f);
}

/* ---------------------------------------------------------------- troff */

/* What the words so far left open: the font that the next word goes on in. */
struct optdoc_font {
    bool bold;      /* inside `...` */
    bool italic;    /* inside <...> */
};

static void optdoc_put(char *out, size_t size, size_t *n, const char *s)
{
    size_t len = strlen(s);

    if (*n + len < size) {
        memcpy(out + *n, s, len + 1);
        *n += len;
    }
}

/* An option named in the words: dashes, then a letter or a digit, then letters, digits, dashes. */
static size_t optdoc_option_length(const char *word, const char *c)
{
    size_t n = 0;

    if (c > word && (isalnum((unsigned char)c[-1]) || c[-1] == '-'))
        return 0;
    while (c[n] == '-')
        n++;
    if (n == 0 || n > 2 || !isalpha((unsigned char)c[n]))
        return 0;
    while (isalnum((unsigned char)c[n]) || c[n] == '-')
        n++;
    return n;
}

/* One word of marked-up text as troff, into out (size bytes, NUL-terminated). */
static void optdoc_troff_word(const char *word, size_t len, struct optdoc_font *font, char *out,
                              size_t size)
{
    size_t n = 0;

    out[0] = '\0';
    for (size_t i = 0; i < len;) {
        const char *c = word + i;
        size_t opt = font->bold || font->italic ? 0 : optdoc_option_length(word, c);

        if (opt > 0) {
            optdoc_put(out, size, &n, "\\fB");
            for (size_t k = 0; k < opt; k++)
                optdoc_put(out, size, &n, c[k] == '-' ? "\\-" : (char[]){ c[k], '\0' });
            optdoc_put(out, size, &n, "\\fR");
            i += opt;
            continue;
        }
        if (*c == '`') {
            font->bold = !font->bold;
            optdoc_put(out, size, &n, font->bold ? "\\fB" : "\\fR");
        } else if (*c == '<' && !font->italic) {
            font->italic = true;
            optdoc_put(out, size, &n, "\\fI");
        } else if (*c == '>' && font->italic) {
            font->italic = false;
            optdoc_put(out, size, &n, font->bold ? "\\fB" : "\\fR");
        } else if (*c == '\\') {
            optdoc_put(out, size, &n, "\\e");
        } else if (*c == '-') {
            /* A dash that starts a word is a minus or an option's; inside one, a hyphen. */
            bool starts = c == word || !isalnum((unsigned char)c[-1]);
            optdoc_put(out, size, &n, starts ? "\\-" : "-");
        } else if (strncmp(c, "\xc2\xb5", 2) == 0) {            /* µ */
            optdoc_put(out, size, &n, "\\(*m");
            i += 2;
            continue;
        } else if (strncmp(c, "\xe2\x80\x94", 3) == 0) {        /* — */
            optdoc_put(out, size, &n, "\\(em");
            i += 3;
            continue;
        } else if (strncmp(c, "\xc3\x97", 2) == 0) {            /* × */
            optdoc_put(out, size, &n, "\\(mu");
            i += 2;
            continue;
        } else {
            optdoc_put(out, size, &n, (char[]){ *c, '\0' });
        }
        i++;
    }
}

/*
 * The words filled into lines. As a sentence (the help's words standing in
 * for the man page's), its first letter is made a capital and it ends in a
 * full stop.
 */
static void optdoc_troff(FILE *f, const char *text, bool sentence)
{
    struct optdoc_font font = { false, false };
    char word[1024];
    size_t column = 0;
    bool first = true;

    for (const char *c = text; *c != '\0';) {
        while (*c == ' ' || *c == '\n')
            c++;
        size_t len = strcspn(c, " \n");
        if (len == 0)
            break;
        optdoc_troff_word(c, len, &font, word, sizeof(word));
        if (sentence && first && islower((unsigned char)word[0]))
            word[0] = (char)toupper((unsigned char)word[0]);
        first = false;
        c += len;
        size_t wlen = strlen(word);
        if (sentence && *c == '\0' && word[wlen - 1] != '.' && wlen + 1 < sizeof(word))
            strcat(word, ".");
        if (column > 0 && column + 1 + strlen(word) > OPTDOC_MAN_WIDTH) {
            fputc('\n', f);
            column = 0;
        }
        if (column > 0) {
            fputc(' ', f);
            column++;
        } else if (word[0] == '.' || word[0] == '\'') {
            fputs("\\&", f);       /* not a request, though it starts the line */
            column += 2;
        }
        fputs(word, f);
        column += strlen(word);
    }
    if (column > 0)
        fputc('\n', f);
}

void optdoc_man_text(FILE *f, const char *text)
{
    optdoc_troff(f, text, false);
}

/* "\-\-name" and the like: every dash a minus. */
static void optdoc_man_dashes(FILE *f, const char *s)
{
    for (; *s != '\0'; s++)
        if (*s == '-')
            fputs("\\-", f);
        else
            fputc(*s, f);
}

void optdoc_man(FILE *f, const struct optdoc *o)
{
    if (o->name == NULL) {
        if (o->man == NULL)
            return;
        const char *nl = strchr(o->man, '\n');
        int title = nl != NULL ? (int)(nl - o->man) : (int)strlen(o->man);
        fprintf(f, ".SS \"%.*s\"\n", title, o->man);
        if (nl != NULL)
            optdoc_man_text(f, nl + 1);
        return;
    }
    if (o->help == NULL)
        return;
    /* man(7)'s way: .BR for "-s, --socket PATH" and [=ARG], .BI for "--name NAME", .B alone. */
    fputs(".TP\n", f);
    if (optdoc_short(o))
        fprintf(f, ".BR \\-%c \", \" \\-\\-", o->id);
    else if (o->has_arg == required_argument)
        fputs(".BI \\-\\-", f);
    else if (o->has_arg == optional_argument)
        fputs(".BR \\-\\-", f);
    else
        fputs(".B \\-\\-", f);
    optdoc_man_dashes(f, o->name);
    if (o->has_arg == required_argument)
        fprintf(f, optdoc_short(o) ? " \" \\fI%s\\fR\"\n" : " \" %s\"\n", o->arg);
    else if (o->has_arg == optional_argument)
        fprintf(f, " [ =\\fI%s\\fR ]\n", o->arg);
    else
        fputc('\n', f);
    optdoc_troff(f, o->man != NULL ? o->man : o->help, o->man == NULL);
}

void optdoc_man_item(FILE *f, const char *word, const char *arg, const char *text)
{
    fputs(".TP\n", f);
    if (arg != NULL)
        fprintf(f, ".BI %s \" %s\"\n", word, arg);
    else
        fprintf(f, ".B %s\n", word);
    optdoc_man_text(f, text);
}

bool optdoc_getopt(const struct optdoc *o, struct option *opt_p, char *shorts)
{
    if (o->name == NULL)
        return false;
    *opt_p = (struct option){ o->name, o->has_arg, NULL, o->id };
    if (optdoc_short(o)) {
        size_t n = strlen(shorts);
        shorts[n++] = (char)o->id;
        if (o->has_arg != no_argument)
            shorts[n++] = ':';
        if (o->has_arg == optional_argument)
            shorts[n++] = ':';
        shorts[n] = '\0';
    }
    return true;
}
