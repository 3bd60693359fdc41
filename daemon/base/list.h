/*
 * list.h — intrusive doubly linked lists (the kernel's list_head shape).
 * An empty list points at itself; a node may sit in one list per member.
 */
#ifndef B10D_LIST_H
#define B10D_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list {
    struct list *prev, *next;
};

#define LIST_INIT(name) { &(name), &(name) }

static inline void list_init(struct list *l)
{
    l->prev = l->next = l;
}

static inline bool list_empty(const struct list *l)
{
    return l->next == l;
}

static inline void list_insert_tail(struct list *head, struct list *node)
{
    node->prev = head->prev;
    node->next = head;
    head->prev->next = node;
    head->prev = node;
}

static inline void list_insert_head(struct list *head, struct list *node)
{
    list_insert_tail(head->next, node);
}

/* Unlink node and leave it self-linked, so a second removal is harmless. */
static inline void list_remove(struct list *node)
{
    node->prev->next = node->next;
    node->next->prev = node->prev;
    list_init(node);
}

/* Move every node of from, in order, to the tail of to; from is left empty. */
static inline void list_splice_tail(struct list *to, struct list *from)
{
    if (list_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    list_init(from);
}

#define list_entry(node, type, member) ((type *)((char *)(node) - offsetof(type, member)))

#define list_for_each_safe(pos, tmp, head) \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); (pos) = (tmp), (tmp) = (pos)->next)

#endif
