#include <config.h>

#include "daemon/policy.h"

static bool gid_listed(const IAConfig *ia, gid_t gid)
{
        for (size_t i = 0; i < ia->n_allow_gids; i++)
                if (ia->allow_gids[i] == gid)
                        return true;
        return false;
}

bool policy_open_to_all(const IAConfig *ia)
{
        return !ia || !ia->restricted;
}

bool policy_allows(const IAConfig *ia, const Peer *peer)
{
        if (peer->uid == 0 || policy_open_to_all(ia))
                return true;
        for (size_t i = 0; i < ia->n_allow_uids; i++)
                if (ia->allow_uids[i] == peer->uid)
                        return true;
        if (gid_listed(ia, peer->gid))
                return true;
        for (size_t i = 0; i < peer->n_groups; i++)
                if (gid_listed(ia, peer->groups[i]))
                        return true;
        return false;
}
