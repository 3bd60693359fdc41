/*
 * optdoc.h — an option written down once: its --help lines and its man page
 * entry both come from one entry of a program's table, and so does its
 * getopt_long record. b10d's table is in config-table.c, b10ctl's in
 * client/b10ctl.c; `make man` puts what `PROGRAM --man=SECTION` prints into
 * the pages (scripts/man-sections.py), and the ops suite's man_options
 * fails when a page is behind its table.
 *
 * The man page's words are marked up lightly, so that a table reads as
 * prose: `bold` (commands, values, files), <italic> (an argument, a path to
 * fill in), and an option named in the text (--view-bytes, -v) is set bold
 * by itself. Line breaks are spaces. troff's own characters are escaped
 * here, never in the tables.
 */
#ifndef B10D_OPTDOC_H
#define B10D_OPTDOC_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

struct optdoc {
    const char *name;   /* the long option, without its dashes; NULL: a heading */
    int id;             /* getopt_long's value: the short option's letter, or one past 255 */
    int has_arg;        /* no_argument, required_argument or optional_argument */
    const char *arg;    /* the argument's name: PATH, SIZE, on|auto|off */
    /*
     * --help's words, '\n' where its lines break; NULL: parsed, shown nowhere
     * (--man). A heading: its --help line; NULL: the man page's alone.
     */
    const char *help;
    /*
     * The man page's words, marked up as above; NULL: the help's. A heading:
     * its subsection's title, then after a '\n' the words that open it.
     */
    const char *man;
};

/*
 * The entry in --help's layout: "  -s, --socket PATH" or "      --name NAME",
 * its words from column on (two spaces further when the option reaches it),
 * each later line indented to column. A heading: a blank line, then its line.
 */
void optdoc_help(FILE *f, const struct optdoc *o, int column);

/* The man page's entry: .TP, the option, its words; a heading: .SS and its words. */
void optdoc_man(FILE *f, const struct optdoc *o);
/* A man page entry for a command word and its argument (NULL: none), e.g. "cancel ID". */
void optdoc_man_item(FILE *f, const char *word, const char *arg, const char *text);
/* Marked-up words as troff lines of at most 80 columns where words allow. */
void optdoc_man_text(FILE *f, const char *text);

/*
 * getopt_long's record of o into *opt_p, and its short form appended to
 * shorts ("s:" for -s PATH); false for a heading, which has none.
 */
bool optdoc_getopt(const struct optdoc *o, struct option *opt_p, char *shorts);

#endif
