module github.com/kvq/kvq/clients/go

go 1.19
