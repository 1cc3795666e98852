def cupti_check_kernel(n):  # the kernel a child times under CUPTI before the notebook relies on CUPTI
    x = torch.ones(n, device="cuda")  # noqa: F821 - the child's program imports torch
    with nsight.annotate("cupti check"):  # noqa: F821 - and nsight
        x * 2.0
