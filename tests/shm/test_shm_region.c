/* The sealed memfd a shm connection's rings live in: what the creator
 * seals, and which descriptors the receiving side refuses to map. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libdat/shm_region.h"

TestSuite(shm_region, .timeout = 15);

#define MAX_SIZE (1u << 20)

Test(shm_region, created_memfd_cannot_be_resized_or_unsealed)
{
        void *mem;
        int fd;

        cr_assert_eq(shm_region_create(10000, &fd, &mem), 0);
        cr_expect_eq(fcntl(fd, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
        cr_expect_eq(ftruncate(fd, 4096), -1);
        cr_expect_eq(ftruncate(fd, 1 << 20), -1);
        cr_expect_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
        cr_expect_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        shm_region_unmap(mem, 12288);
        close(fd);
}

Test(shm_region, create_refuses_size_zero)
{
        void *mem;
        int fd;

        cr_expect_eq(shm_region_create(0, &fd, &mem), -EINVAL);
}

Test(shm_region, mapped_memfd_is_the_same_memory_of_the_page_rounded_size)
{
        void *a, *b;
        size_t size;
        int fd;

        cr_assert_eq(shm_region_create(5000, &fd, &a), 0);
        cr_assert_eq(shm_region_map(fd, MAX_SIZE, &b, &size), 0);
        cr_expect_eq(size, 8192);
        memcpy(a, "ring", 5);
        cr_expect_str_eq(b, "ring");
        shm_region_unmap(a, size);
        shm_region_unmap(b, size);
        close(fd);
}

Test(shm_region, map_refuses_a_memfd_larger_than_allowed)
{
        void *a, *b;
        size_t size;
        int fd;

        cr_assert_eq(shm_region_create(2 * MAX_SIZE, &fd, &a), 0);
        cr_expect_eq(shm_region_map(fd, MAX_SIZE, &b, &size), -EPROTO);
        shm_region_unmap(a, 2 * MAX_SIZE);
        close(fd);
}

Test(shm_region, map_refuses_a_memfd_the_peer_could_still_truncate)
{
        void *b;
        size_t size;
        int fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        cr_assert_geq(fd, 0);
        cr_assert_eq(ftruncate(fd, 4096), 0);
        cr_expect_eq(shm_region_map(fd, MAX_SIZE, &b, &size), -EPROTO);
        /* growing sealed but not shrinking: still refused */
        cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW), 0);
        cr_expect_eq(shm_region_map(fd, MAX_SIZE, &b, &size), -EPROTO);
        close(fd);
}

Test(shm_region, map_refuses_a_descriptor_that_is_not_a_memfd)
{
        void *b;
        size_t size;
        int p[2];

        cr_assert_eq(pipe(p), 0);
        cr_expect_eq(shm_region_map(p[0], MAX_SIZE, &b, &size), -EPROTO);
        close(p[0]);
        close(p[1]);
}

Test(shm_region, map_refuses_an_empty_memfd)
{
        void *b;
        size_t size;
        int fd = memfd_create("empty", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        cr_assert_geq(fd, 0);
        cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
        cr_expect_eq(shm_region_map(fd, MAX_SIZE, &b, &size), -EPROTO);
        close(fd);
}
