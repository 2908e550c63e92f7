module spark-exec-svc.invalid/e2e/nsforward

go 1.26.0

require golang.org/x/sys v0.50.0
