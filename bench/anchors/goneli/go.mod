module github.com/elect/bench/anchors/goneli

go 1.26.0

require (
	github.com/obsidiandynamics/goneli v0.4.3
	github.com/obsidiandynamics/libstdgo v0.4.1
	golang.org/x/sys v0.49.0
	gopkg.in/confluentinc/confluent-kafka-go.v1 v1.8.2
)

require (
	github.com/confluentinc/confluent-kafka-go v1.8.2 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/go-ozzo/ozzo-validation v3.6.0+incompatible // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/stretchr/testify v1.7.1 // indirect
	gopkg.in/yaml.v3 v3.0.0-20210107192922-496545a6307b // indirect
)

replace gopkg.in/confluentinc/confluent-kafka-go.v1 => github.com/confluentinc/confluent-kafka-go v1.9.2
