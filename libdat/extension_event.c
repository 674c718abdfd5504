/* The completion events of the DAT IB extensions (dat_ib_extensions.h),
 * for the DTO engine (dto.h: dto_ext_event): the engine fills the common
 * DTO completion, this makes it a DAT_IB_DTO_EVENT with the extension's
 * operation and, in event_extension_data, its DAT_IB_EXTENSION_EVENT_DATA:
 *
 *   the request's own       operation                    type
 *   Write with immediate    DAT_IB_DTO_RDMA_WRITE_IMMED  DAT_IB_RDMA_WRITE_IMMED
 *   compare-and-swap        DAT_IB_DTO_CMP_SWAP          DAT_IB_CMP_AND_SWAP
 *   fetch-and-add           DAT_IB_DTO_FETCH_ADD         DAT_IB_FETCH_AND_ADD
 *   the target's receive    DAT_IB_DTO_RECV_IMMED        DAT_IB_RDMA_WRITE_IMMED_DATA,
 *                                                        val.immed.data the immediate
 *
 * transfered_length is the engine's: the bytes written (on both sides of
 * a Write with immediate data), 8 for an atomic.  The record's status is
 * DAT_OP_SUCCESS or DAT_IB_OP_ERR (the DTO status has the detail), its
 * type is set on error completions too, and its context is the DTO's
 * cookie.  These are what dtestx checks (event number, type, length,
 * cookie, immediate). */
#include "config.h"

#include <string.h>

#include <dat2/dat_ib_extensions.h>

#include "libdat/dto.h"

_Static_assert(sizeof(DAT_IB_EXTENSION_EVENT_DATA) <=
                       sizeof(((DAT_EVENT *)0)->event_extension_data),
               "the IB extension data fits the event's extension area");

void dto_ext_event(DAT_EVENT *event, enum dto_ext_kind kind, bool receive, uint32_t immed)
{
        DAT_DTO_COMPLETION_EVENT_DATA *dto = &event->event_data.dto_completion_event_data;
        DAT_IB_EXTENSION_EVENT_DATA ext;

        memset(&ext, 0, sizeof(ext));
        ext.status = dto->status == DAT_DTO_SUCCESS ? DAT_OP_SUCCESS : DAT_IB_OP_ERR;
        switch (kind) {
        case DTO_EXT_WRITE_IMM:
                if (receive) {
                        /* The target's receive, consumed by the Write. */
                        dto->operation = (DAT_DTOS)DAT_IB_DTO_RECV_IMMED;
                        ext.type = DAT_IB_RDMA_WRITE_IMMED_DATA;
                        ext.val.immed.data = immed;
                } else {
                        dto->operation = (DAT_DTOS)DAT_IB_DTO_RDMA_WRITE_IMMED;
                        ext.type = DAT_IB_RDMA_WRITE_IMMED;
                }
                break;
        case DTO_EXT_CMP_SWAP:
                dto->operation = (DAT_DTOS)DAT_IB_DTO_CMP_SWAP;
                ext.type = DAT_IB_CMP_AND_SWAP;
                break;
        case DTO_EXT_FETCH_ADD:
                dto->operation = (DAT_DTOS)DAT_IB_DTO_FETCH_ADD;
                ext.type = DAT_IB_FETCH_AND_ADD;
                break;
        }
        ext.context = dto->user_cookie;
        event->event_number = (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT;
        memcpy(event->event_extension_data, &ext, sizeof(ext));
}
