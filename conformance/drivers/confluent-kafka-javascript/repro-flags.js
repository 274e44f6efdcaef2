const LibrdKafkaError = require('@confluentinc/kafka-javascript/lib/error.js')
const { createKafkaJsErrorFromLibRdKafkaError } = require('@confluentinc/kafka-javascript/lib/kafkajs/_common.js')
const e = new LibrdKafkaError({ message: 'commit failed', code: LibrdKafkaError.codes.ERR__TIMED_OUT,
                                isFatal: false, isRetriable: true, isTxnRequiresAbort: false })
const f = new LibrdKafkaError({ message: 'fenced', code: LibrdKafkaError.codes.ERR__FENCED,
                                isFatal: true, isRetriable: false, isTxnRequiresAbort: false })
for (const x of [e, f]) {
  const k = createKafkaJsErrorFromLibRdKafkaError(x)
  console.log(`librdkafka: isFatal=${x.isFatal} isRetriable=${x.isRetriable} isTxnRequiresAbort=${x.isTxnRequiresAbort} -> KafkaJS: fatal=${k.fatal} retriable=${k.retriable} abortable=${k.abortable}`)
}
