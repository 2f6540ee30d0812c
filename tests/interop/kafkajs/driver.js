'use strict'
/**
 * kafkajs, driven by tests/interop/test_kafkajs.py: `node driver.js COMMAND` reads one JSON job from stdin and
 * writes one JSON result to stdout (kafkajs logs go to stderr). Bytes travel as base64 strings, null as null.
 *
 * Commands (every job has `brokers`; it may have `sasl`, kafkajs's {mechanism, username, password}, to authenticate
 * with SASL, and `ssl` ({ca, cert, key}, PEM text) to connect with TLS; both for SASL_SSL):
 * - admin    {topic, partitions, invalidTopic}: createTopics twice, once with an illegal name, then metadata.
 * - produce  {topic, partitions, records, idempotent, compression, chunk}: send the records in chunks, each record
 *            to the partition kafkajs's default (Java-compatible) partitioner picks; one {partition, offset} each.
 * - consume  {topic, groupId, expected, readUncommitted, idleMs}: a group member reading from the beginning until
 *            `expected` records arrived and then `idleMs` passed without more; the records in arrival order.
 * - txn      {topic, transactionalId, transactions: [{records, commit}]}: one transaction per entry, each record to
 *            its given partition, committed or aborted.
 * - copy     {source, sink, groupId, transactionalId, expected}: consume-transform-produce with
 *            sendOffsets, a transaction per batch, until `expected` records were copied.
 * - configs  {topic, configs, invalid}: alterConfigs of the topic to `configs` ({name: value}), then describeConfigs
 *            (each entry's value and source); then alterConfigs to `invalid`, whose error type is returned.
 * - partitions {topic, count}: createPartitions to `count`, the same again (no increase), then metadata and one
 *            record sent to the last partition.
 * - records  {topic, partitions: [{partition, offset}], beyond}: fetchTopicOffsets (which loads the topic's
 *            metadata, as deleteTopicRecords needs), deleteTopicRecords below each offset (-1: the high watermark),
 *            fetchTopicOffsets again (each partition's low and high); then deleteTopicRecords of partition 0 below
 *            `beyond`, whose partition error types are returned.
 * - acls     {topic}: describeAcls, createAcls (a READ ACL on the topic) and deleteAcls; each one's error type, or
 *            its result when it succeeds.
 */
const {
  Kafka,
  logLevel,
  CompressionTypes,
  Partitioners,
  ConfigResourceTypes,
  AclResourceTypes,
  AclOperationTypes,
  AclPermissionTypes,
  ResourcePatternTypes,
} = require('kafkajs')

const fromB64 = value => (value === null ? null : Buffer.from(value, 'base64'))
const toB64 = value => (value === null || value === undefined ? null : Buffer.from(value).toString('base64'))

/** The job's SASL settings (kafkajs's `sasl` option), or null without SASL. */
let jobSasl = null
/** TLS options of every client (Node's tls.connect options: ca, cert, key as PEM text), from the job's `ssl`. */
let tlsOptions

const client = brokers =>
  new Kafka({
    clientId: 'oncelog-interop-kafkajs',
    brokers,
    logLevel: logLevel.WARN,
    retry: { retries: 8 },
    ...(jobSasl ? { sasl: jobSasl } : {}),
    ...(tlsOptions ? { ssl: tlsOptions } : {}),
  })

/** kafkajs's message: headers become an object, a repeated name an array (in first-appearance order). */
const toMessage = record => {
  const headers = {}
  for (const [name, value] of record.headers) {
    const bytes = fromB64(value)
    if (!(name in headers)) headers[name] = bytes
    else if (Array.isArray(headers[name])) headers[name].push(bytes)
    else headers[name] = [headers[name], bytes]
  }
  return {
    key: fromB64(record.key),
    value: fromB64(record.value),
    headers,
    timestamp: String(record.timestamp),
    ...(record.partition === undefined ? {} : { partition: record.partition }),
  }
}

const fromMessage = (partition, message) => ({
  partition,
  offset: Number(message.offset),
  key: toB64(message.key),
  value: toB64(message.value),
  headers: Object.entries(message.headers || {}).flatMap(([name, value]) =>
    (Array.isArray(value) ? value : [value]).map(v => [name, toB64(v)])
  ),
  timestamp: Number(message.timestamp),
})

async function admin({ brokers, topic, partitions, invalidTopic }) {
  const kafkaAdmin = client(brokers).admin()
  await kafkaAdmin.connect()
  try {
    const created = await kafkaAdmin.createTopics({ topics: [{ topic, numPartitions: partitions }] })
    const createdAgain = await kafkaAdmin.createTopics({ topics: [{ topic, numPartitions: partitions }] })
    let invalidError = null
    try {
      await kafkaAdmin.createTopics({ topics: [{ topic: invalidTopic, numPartitions: 1 }] })
    } catch (error) {
      invalidError = (error.errors || [error]).map(e => e.type || e.name).join(',')
    }
    const metadata = await kafkaAdmin.fetchTopicMetadata({ topics: [topic] })
    const listed = await kafkaAdmin.listTopics()
    return {
      created,
      createdAgain,
      invalidError,
      partitions: metadata.topics[0].partitions.map(p => ({ partition: p.partitionId, leader: p.leader })),
      listed: listed.includes(topic),
    }
  } finally {
    await kafkaAdmin.disconnect()
  }
}

async function partitions({ brokers, topic, count }) {
  const kafka = client(brokers)
  const kafkaAdmin = kafka.admin()
  await kafkaAdmin.connect()
  try {
    await kafkaAdmin.createPartitions({ topicPartitions: [{ topic, count }] })
    let againError = null
    try {
      await kafkaAdmin.createPartitions({ topicPartitions: [{ topic, count }] })
    } catch (error) {
      againError = error.type || error.name
    }
    const metadata = await kafkaAdmin.fetchTopicMetadata({ topics: [topic] })
    const producer = kafka.producer()
    await producer.connect()
    let sent
    try {
      sent = await producer.send({ topic, messages: [{ value: 'on-the-new-partition', partition: count - 1 }] })
    } finally {
      await producer.disconnect()
    }
    return {
      againError,
      partitions: metadata.topics[0].partitions.map(p => p.partitionId).sort((a, b) => a - b),
      sent: sent.map(r => ({ partition: r.partition, offset: Number(r.baseOffset), errorCode: r.errorCode })),
    }
  } finally {
    await kafkaAdmin.disconnect()
  }
}

async function produce({ brokers, topic, partitions, records, idempotent, compression, chunk }) {
  const producer = client(brokers).producer({
    idempotent,
    maxInFlightRequests: idempotent ? 1 : undefined,
    createPartitioner: Partitioners.DefaultPartitioner,
  })
  // The same partitioner the producer would use, asked first so that each record's offset can be told from the
  // per-partition base offsets kafkajs reports.
  const choose = Partitioners.DefaultPartitioner()
  const partitionMetadata = Array.from({ length: partitions }, (_, p) => ({ partitionId: p, leader: 0 }))
  await producer.connect()
  const delivered = []
  try {
    for (let start = 0; start < records.length; start += chunk) {
      const messages = records.slice(start, start + chunk).map(toMessage)
      for (const message of messages) message.partition = choose({ topic, partitionMetadata, message })
      const answers = await producer.send({
        topic,
        messages,
        acks: -1,
        compression: CompressionTypes[compression],
      })
      const next = new Map(answers.map(a => [a.partition, Number(a.baseOffset)]))
      for (const message of messages) {
        const offset = next.get(message.partition)
        next.set(message.partition, offset + 1)
        delivered.push({ partition: message.partition, offset })
      }
    }
  } finally {
    await producer.disconnect()
  }
  return { delivered }
}

/** Resolves once `enough()` holds and `idleMs` passed since the last batch, then stops the consumer. */
async function runUntil(consumer, subscription, eachBatch, enough, idleMs, deadlineMs, options = {}) {
  let last = Date.now()
  await consumer.subscribe(subscription)
  await consumer.run({
    ...options,
    eachBatch: async payload => {
      await eachBatch(payload)
      last = Date.now()
    },
  })
  const deadline = Date.now() + deadlineMs
  while (!(enough() && Date.now() - last >= idleMs)) {
    if (Date.now() > deadline) throw new Error('deadline passed before the expected records arrived')
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  await consumer.disconnect()
}

async function consume({ brokers, topic, groupId, expected, readUncommitted, idleMs }) {
  const consumer = client(brokers).consumer({ groupId, readUncommitted, maxWaitTimeInMs: 100 })
  await consumer.connect()
  const consumed = []
  await runUntil(
    consumer,
    { topics: [topic], fromBeginning: true },
    async ({ batch }) => {
      for (const message of batch.messages) consumed.push(fromMessage(batch.partition, message))
    },
    () => consumed.length >= expected,
    idleMs,
    60000
  )
  return { consumed }
}

async function txn({ brokers, topic, transactionalId, transactions }) {
  const producer = client(brokers).producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const outcomes = []
  try {
    for (const { records, commit } of transactions) {
      const transaction = await producer.transaction()
      const answers = await transaction.send({ topic, messages: records.map(toMessage), acks: -1 })
      if (commit) await transaction.commit()
      else await transaction.abort()
      outcomes.push(answers.map(a => ({ partition: a.partition, baseOffset: Number(a.baseOffset) })))
    }
  } finally {
    await producer.disconnect()
  }
  return { outcomes }
}

async function copy({ brokers, source, sink, groupId, transactionalId, expected }) {
  const kafka = client(brokers)
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100 })
  await producer.connect()
  await consumer.connect()
  let copied = 0
  let transactions = 0
  try {
    await runUntil(
      consumer,
      { topics: [source], fromBeginning: true },
      async ({ batch, heartbeat }) => {
        if (batch.messages.length === 0) return
        const transaction = await producer.transaction()
        try {
          await transaction.send({
            topic: sink,
            messages: batch.messages.map(m => ({
              key: m.key,
              value: Buffer.concat([Buffer.from('copied:'), m.value || Buffer.alloc(0)]),
              headers: { source: `${batch.partition}/${m.offset}` },
            })),
            acks: -1,
          })
          const next = String(Number(batch.lastOffset()) + 1)
          await transaction.sendOffsets({
            consumerGroupId: groupId,
            topics: [{ topic: source, partitions: [{ partition: batch.partition, offset: next }] }],
          })
          await transaction.commit()
        } catch (error) {
          await transaction.abort()
          throw error
        }
        copied += batch.messages.length
        transactions += 1
        await heartbeat()
      },
      () => copied >= expected,
      500,
      60000,
      // The offsets travel in the transaction; the batch's offsets are resolved when eachBatch returns.
      { autoCommit: false }
    )
  } finally {
    await producer.disconnect()
  }
  return { copied, transactions }
}

async function configs({ brokers, topic, configs, invalid }) {
  const kafkaAdmin = client(brokers).admin()
  const resource = entries => ({
    type: ConfigResourceTypes.TOPIC,
    name: topic,
    configEntries: Object.entries(entries).map(([name, value]) => ({ name, value })),
  })
  await kafkaAdmin.connect()
  try {
    const altered = await kafkaAdmin.alterConfigs({ resources: [resource(configs)] })
    const described = await kafkaAdmin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
      includeSynonyms: false,
    })
    let invalidError = null
    try {
      await kafkaAdmin.alterConfigs({ resources: [resource(invalid)] })
    } catch (error) {
      invalidError = error.type || error.name
    }
    const entries = {}
    for (const entry of described.resources[0].configEntries) {
      entries[entry.configName] = { value: entry.configValue, source: entry.configSource }
    }
    return { altered: altered.resources, entries, invalidError }
  } finally {
    await kafkaAdmin.disconnect()
  }
}

async function records({ brokers, topic, partitions, beyond }) {
  const kafkaAdmin = client(brokers).admin()
  const asStrings = entries => entries.map(({ partition, offset }) => ({ partition, offset: String(offset) }))
  await kafkaAdmin.connect()
  try {
    await kafkaAdmin.fetchTopicOffsets(topic)
    await kafkaAdmin.deleteTopicRecords({ topic, partitions: asStrings(partitions) })
    const offsets = await kafkaAdmin.fetchTopicOffsets(topic)
    let beyondError = null
    try {
      await kafkaAdmin.deleteTopicRecords({ topic, partitions: asStrings([{ partition: 0, offset: beyond }]) })
    } catch (error) {
      const cause = error.cause || error // the retrier wraps the KafkaJSDeleteTopicRecordsError
      beyondError = (cause.partitions || [{ error: cause }]).map(p => p.error.type || p.error.name).join(',')
    }
    return {
      offsets: offsets
        .map(o => ({ partition: o.partition, low: Number(o.low), high: Number(o.high) }))
        .sort((a, b) => a.partition - b.partition),
      beyondError,
    }
  } finally {
    await kafkaAdmin.disconnect()
  }
}

/** ``call``'s result as {result} or, when it throws, {error: the kafkajs error type}. */
async function outcome(call) {
  try {
    return { result: await call() }
  } catch (error) {
    return { error: error.type || error.name }
  }
}

async function acls({ brokers, topic }) {
  const kafkaAdmin = client(brokers).admin()
  await kafkaAdmin.connect()
  const any = {
    resourceType: AclResourceTypes.ANY,
    resourcePatternType: ResourcePatternTypes.ANY,
    operation: AclOperationTypes.ANY,
    permissionType: AclPermissionTypes.ANY,
  }
  const readAcl = {
    resourceType: AclResourceTypes.TOPIC,
    resourceName: topic,
    resourcePatternType: ResourcePatternTypes.LITERAL,
    principal: 'User:alice',
    host: '*',
    operation: AclOperationTypes.READ,
    permissionType: AclPermissionTypes.ALLOW,
  }
  try {
    return {
      described: await outcome(() => kafkaAdmin.describeAcls(any)),
      created: await outcome(() => kafkaAdmin.createAcls({ acl: [readAcl] })),
      deleted: await outcome(() => kafkaAdmin.deleteAcls({ filters: [any] })),
    }
  } finally {
    await kafkaAdmin.disconnect()
  }
}

const COMMANDS = { admin, partitions, produce, consume, txn, copy, configs, records, acls }

async function main() {
  const command = COMMANDS[process.argv[2]]
  if (!command) throw new Error(`unknown command ${process.argv[2]}; one of ${Object.keys(COMMANDS)}`)
  const chunks = []
  for await (const piece of process.stdin) chunks.push(piece)
  const job = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  jobSasl = job.sasl || null
  tlsOptions = job.ssl
  const result = await command(job)
  process.stdout.write(JSON.stringify(result))
}

main().catch(error => {
  process.stderr.write(`${error.stack || error}\n`)
  process.exit(1)
})
