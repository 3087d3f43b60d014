/*
 * check_suite.c -- a tiny Check suite with every outcome the grader must tell
 * apart, used to record check_log.xml and by test_checkrun.py (built with gcc
 * when Check is installed).  Not a lab: it touches no GPU.
 *
 *   gcc check_suite.c -o check $(pkg-config --cflags --libs check)
 *   ./check --list                      one "<tcase>\t<iteration>\t<label>" line per case
 *   CK_XML_LOG_FILE_NAME=check_log.xml ./check
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int edge_nx[] = {1, 2, 33, 64};

START_TEST(t_pass) { ck_assert_int_eq(1, 1); }
END_TEST

START_TEST(t_fail)
{
    ck_assert_msg(0, "nx=33 ny=9: 3 mismatches; first at (x=1, y=2): got 1.5 want 2.5");
}
END_TEST

START_TEST(t_segv) { raise(SIGSEGV); }
END_TEST

START_TEST(t_hang) { for (;;) {} }
END_TEST

START_TEST(t_exit) { exit(3); }
END_TEST

START_TEST(t_cuda)
{
    ck_abort_msg("CUDA error: an illegal memory access was encountered "
                 "(cudaStreamSynchronize(stream) at check_runner.c:88)");
}
END_TEST

START_TEST(t_edges)
{
    ck_assert_msg(edge_nx[_i] != 2, "nx=%d ny=9: 1 mismatch; first at (x=0, y=4): got nan want <0.5>",
                  edge_nx[_i]);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        printf("basic\t0\tpass\nbasic\t0\tfail\n");
        printf("crashes\t0\tsegv\ncrashes\t0\thang\ncrashes\t0\texit\ncrashes\t0\tcuda\n");
        for (int i = 0; i < 4; ++i)
            printf("edges\t%d\tnx=%d ny=9\n", i, edge_nx[i]);
        return 0;
    }
    Suite *s = suite_create("fixture");
    TCase *basic = tcase_create("basic");
    tcase_add_test(basic, t_pass);
    tcase_add_test(basic, t_fail);
    suite_add_tcase(s, basic);
    TCase *crashes = tcase_create("crashes");
    tcase_set_timeout(crashes, 1);
    tcase_add_test(crashes, t_segv);
    tcase_add_test(crashes, t_hang);
    tcase_add_test(crashes, t_exit);
    tcase_add_test(crashes, t_cuda);
    suite_add_tcase(s, crashes);
    TCase *edges = tcase_create("edges");
    tcase_add_loop_test(edges, t_edges, 0, 4);
    suite_add_tcase(s, edges);

    SRunner *sr = srunner_create(s);
    printf("seed: 4242\n");
    fflush(stdout);   /* before Check forks, or every child flushes its own copy */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
