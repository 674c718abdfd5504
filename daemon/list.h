/* Intrusive doubly linked lists: a parent keeps the head pointer, each child
 * carries its own link fields, so unlinking a child needs no search and no
 * allocation. */
#ifndef DATD_DAEMON_LIST_H
#define DATD_DAEMON_LIST_H

#include <stddef.h>

#define LIST_FIELDS(type, name) type *name##_next, *name##_prev

#define LIST_PREPEND(name, head, item)                                  \
        do {                                                            \
                __typeof__(item) _item = (item);                        \
                _item->name##_prev = NULL;                              \
                _item->name##_next = (head);                            \
                if (head)                                               \
                        (head)->name##_prev = _item;                    \
                (head) = _item;                                         \
        } while (0)

#define LIST_REMOVE(name, head, item)                                   \
        do {                                                            \
                __typeof__(item) _item = (item);                        \
                if (_item->name##_next)                                 \
                        _item->name##_next->name##_prev = _item->name##_prev; \
                if (_item->name##_prev)                                 \
                        _item->name##_prev->name##_next = _item->name##_next; \
                else if ((head) == _item)                               \
                        (head) = _item->name##_next;                    \
                _item->name##_next = _item->name##_prev = NULL;         \
        } while (0)

#define LIST_FOREACH(name, i, head) for ((i) = (head); (i); (i) = (i)->name##_next)

/* Safe against freeing i inside the loop. */
#define LIST_FOREACH_SAFE(name, i, n, head) \
        for ((i) = (head); (i) && (((n) = (i)->name##_next), 1); (i) = (n))

#endif
