/* Tenant policy: who may open which IA. */
#ifndef DATD_DAEMON_POLICY_H
#define DATD_DAEMON_POLICY_H

#include <stdbool.h>

#include "daemon/config.h"
#include "daemon/peer.h"

/* root always; everyone when the IA names no users and no groups (ia NULL:
 * an IA without configuration); else the peer's uid must be listed, or its
 * primary or a supplementary group. */
bool policy_allows(const IAConfig *ia, const Peer *peer);

/* Names no users and no groups (or NULL: an IA without configuration). */
bool policy_open_to_all(const IAConfig *ia);

#endif
